//go:build integration

package operator

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/cmdutil"
	"sunk.dev/sunk/internal/controller/nodeset"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/internal/validation"
	sunkwebhook "sunk.dev/sunk/internal/webhook"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// The harness every controller test of this package shares: a real kube-apiserver, the
// operator's controllers and webhook in one manager, the in-memory Slurm, and a direct
// client for the test's own reads.

// fakeExec plays kubelet's volume delivery: it answers `head -n1 slurm.conf` with the
// first line of whatever the test says the pod currently sees.
type fakeExec struct {
	mu   sync.Mutex
	seen map[string]string // pod -> slurm.conf first line
}

func (f *fakeExec) Exec(_ context.Context, ns, pod, container string, cmd ...string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line, ok := f.seen[pod]
	if !ok {
		return "", fmt.Errorf("pod %s/%s not running", ns, pod)
	}
	return line + "\n", nil
}

func (f *fakeExec) deliver(pod, slurmConf string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	first, _, _ := strings.Cut(slurmConf, "\n")
	f.seen[pod] = first
}

type harness struct {
	c     client.Client
	ns    string
	exec  *fakeExec
	slurm *slurmfake.Fake
	k     *kubelet // the compute pods' kubelet, when a test starts it
}

func start(t *testing.T) *harness {
	t.Helper()
	return startOperator(t, startAPI(t))
}

// startAPI starts the kube-apiserver with sunk's CRDs and webhooks.
func startAPI(t *testing.T) *envtest.Environment {
	t.Helper()
	root := testenv.RepoRoot()
	return testenv.APIEnv(t, testenv.APIOptions{
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")},
		WebhookPaths:      []string{filepath.Join(root, "config", "webhook")},
	})
}

// admissionOptions are the operator's admission settings in these tests: the admin lets
// SlurmClusters take over SlurmctldPort (TestConfigChangeReconfiguresWithoutRestart), and no
// other key sunk keeps.
var admissionOptions = sunkwebhook.Options{Validation: validation.Options{AllowedUnsafeConfKeys: []string{"SlurmctldPort"}},
	Authors: sunkwebhook.Authors{Groups: []string{sunkwebhook.DefaultPrivilegedGroup}, Images: []string{"sunk.dev/slurm:*"}}}

// startOperator runs the operator's controllers and webhook against env, and creates the
// test's namespace; options change the SlurmCluster reconciler before it starts.
func startOperator(t *testing.T, env *envtest.Environment, options ...func(*slurmcluster.Reconciler)) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	wh := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme,
		// The operator's own cache: every test also checks that what the operator reads is
		// in it or read past it.
		Cache:   cmdutil.OperatorCacheOptions(nil),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Every test runs its own manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The test reads with a direct client: the manager's cache may lag behind its writes.
	h := &harness{c: direct, exec: &fakeExec{seen: map[string]string{}}, slurm: slurmfake.New()}
	r := &slurmcluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme, Exec: h.exec, Validation: admissionOptions.Validation,
		Slurm: slurmconn.New(slurmconn.Options{Reader: kube.CacheThenAPIReader{Cache: mgr.GetClient(), API: mgr.GetAPIReader()},
			Factory: func(url string, keys slurmconn.Keys, _ *http.Client) (slurm.Client, error) {
				if len(keys.Current) < 32 {
					return nil, fmt.Errorf("jwt key of %d bytes", len(keys.Current))
				}
				return h.slurm, nil
			}}),
	}
	for _, o := range options {
		o(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	nr := &nodeset.Reconciler{
		Client: mgr.GetClient(), Scheme: scheme, Slurm: r.Slurm,
		// Slurm has no watch: while waiting on it the controller polls, and refreshes the
		// Slurm half of the status now and then; both fast here.
		PollInterval: 200 * time.Millisecond, ResyncInterval: time.Second,
	}
	if err := nr.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := sunkwebhook.SetupSlurmClusterWebhook(mgr, admissionOptions); err != nil {
		t.Fatal(err)
	}
	if err := sunkwebhook.SetupNodeSetWebhook(mgr, admissionOptions); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	h.ns = "slurm"
	if err := h.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}); err != nil {
		t.Fatal(err)
	}
	return h
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	wait.For(t, what, 30*time.Second, 100*time.Millisecond, cond)
}

func (h *harness) get(t *testing.T, name string, o client.Object) error {
	return h.c.Get(context.Background(), types.NamespacedName{Namespace: h.ns, Name: name}, o)
}

func (h *harness) cluster(t *testing.T, name string) *sunkv1.SlurmCluster {
	sc := &sunkv1.SlurmCluster{}
	if err := h.get(t, name, sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

func condition(sc *sunkv1.SlurmCluster, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(sc.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// newCluster is a 24.11 cluster (its image's release; admission would make a cluster without
// slurmVersion a 26.05 one).
func newCluster(ns, name string) *sunkv1.SlurmCluster {
	return &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sunkv1.SlurmClusterSpec{
			SlurmVersion: sunkv1.SlurmVersion2411,
			Image:        "sunk.dev/slurm:24.11-local",
			Accounting:   sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged},
			Partitions:   []sunkv1.PartitionSpec{{Name: "batch"}},
			Prolog:       []sunkv1.Script{{Name: "marker", ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "site-scripts"}, Key: "marker.sh"}}},
		},
	}
}

// runControlPlane plays the StatefulSet controller and kubelet for a cluster's control plane:
// a Ready slurmctld pod (which sees no configuration until the test delivers one) and an
// available slurmrestd. It returns the StatefulSet as the operator made it, and the pod.
func (h *harness) runControlPlane(t *testing.T, cluster string) (*appsv1.StatefulSet, *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	ctld := &appsv1.StatefulSet{}
	eventually(t, "controller StatefulSet", func() error { return h.get(t, cluster+"-controller", ctld) })
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: cluster + "-controller-0",
		Labels: ctld.Spec.Template.Labels, Annotations: ctld.Spec.Template.Annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmctld", Image: "x"}}}}
	if err := h.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := h.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var rest appsv1.Deployment
	eventually(t, "restapi Deployment", func() error { return h.get(t, cluster+"-restapi", &rest) })
	rest.Status.Replicas, rest.Status.AvailableReplicas, rest.Status.ReadyReplicas = 1, 1, 1
	if err := h.c.Status().Update(ctx, &rest); err != nil {
		t.Fatal(err)
	}
	return ctld, pod
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
