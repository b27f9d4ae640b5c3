//go:build e2e

// Package e2e runs sunk end to end on a real kubelet with containerd: the Helm charts, a Slurm
// cluster's pods, NodeSets, the scheduler, eviction, deletion and admission on the live cluster.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/cmdutil"
	"sunk.dev/sunk/internal/controller/nodeset"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// testSlurmVersion is the release the e2e tests' clusters run: the default of new clusters
// (issue 15 asks the long tests to run on it). TestUpgrade2411To2605 starts on 24.11.
const testSlurmVersion = sunkv1.SlurmVersion2605

// slurmImage is the test bed's image of testSlurmVersion (hack/images.sh).
const slurmImage = slurmImage2605

// slurmImage2411 is Slurm 24.11 from Debian trixie.
const slurmImage2411 = "sunk.dev/slurm:24.11-local"

// localImages are the test bed's Slurm images per release (hack/images.sh), the operator's
// --slurm-images here.
var localImages = slurmversion.Images{sunkv1.SlurmVersion2411: slurmImage2411, sunkv1.SlurmVersion2605: slurmImage2605}

// operatorEnv is the local cluster with sunk's CRDs installed and the operator's
// reconcilers running in this test process (the chart that deploys them in-cluster is
// tested by the Helm journey).
type operatorEnv struct {
	*testenv.ClusterEnv
	c    client.Client
	exec *kube.PodExecer
	ns   string
	// metrics holds the NodeSet controller's metrics (its autoscaler's).
	metrics *prometheus.Registry
}

// crdInstalls serialises this process's CRD installs. envtest.InstallCRDs creates a CRD it did
// not find: two parallel tests starting on a fresh cluster both created it, and one failed with
// AlreadyExists (TestUpgrade2411To2605 beside TestSlurm2605Cluster, in a whole run).
var crdInstalls sync.Mutex

// installCRDs installs or updates sunk's CRDs. A test process of another checkout may race it
// too: AlreadyExists and Conflict are retried, and the retry finds the CRD and updates it.
func installCRDs(t testing.TB, cfg *rest.Config) {
	t.Helper()
	crdInstalls.Lock()
	defer crdInstalls.Unlock()
	for attempt := 1; ; attempt++ {
		_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")}, ErrorIfPathMissing: true,
		})
		if err == nil {
			return
		}
		if attempt < 3 && (apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)) {
			t.Logf("installing CRDs raced another installer (%v); again", err)
			continue
		}
		t.Fatalf("installing CRDs: %v", err)
	}
}

func startOperator(t testing.TB) *operatorEnv {
	t.Helper()
	cl := testenv.Cluster(t)
	// The operator logs to stderr, which go test shows with -v or on failure.
	ctrl.SetLogger(zap.New())
	installCRDs(t, cl.Config)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("e2e-slurm-%d", rand.IntN(1e6))
	namespaces := cmdutil.WatchNamespaces(ns)
	mgr, err := ctrl.NewManager(cl.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Each test runs its own operator in this process, and sees only its own namespace:
		// tests of other checkouts share the cluster, and an operator of other code (or
		// without the config check) reconciling their SlurmClusters rolls or breaks their pods.
		Cache:      cache.Options{DefaultNamespaces: namespaces},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	execer, err := kube.NewPodExecer(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	clusters := &slurmcluster.Reconciler{Client: mgr.GetClient(), Scheme: scheme, Exec: execer, Logs: execer, Namespaces: namespaces, Images: localImages}
	if err := clusters.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&slurmcluster.LoginPools{Reconciler: clusters, Poll: 2 * time.Second, Directory: dialThroughServiceIP(mgr.GetAPIReader())}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	nodeSetMetrics, err := nodeset.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&nodeset.Reconciler{Client: mgr.GetClient(), Scheme: scheme, PollInterval: 2 * time.Second, Images: localImages, Metrics: nodeSetMetrics}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := (&syncer.Clusters{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	direct, err := client.New(cl.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Strict: a field the served CRD does not know fails the write instead of being dropped. An
	// updated CRD takes a moment to be served with its new schema, and another checkout's test
	// may install its own CRDs meanwhile; without this, a new spec field vanished silently.
	e := &operatorEnv{ClusterEnv: cl, c: client.WithFieldValidation(direct, metav1.FieldValidationStrict), exec: execer, ns: ns, metrics: reg}
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpNamespace(t)
		}
		// The operator must outlive the namespace: compute pods carry its finalizer until
		// their Slurm records are dealt with.
		e.deleteNamespace(t)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})
	return e
}

// cordon cordons (or uncordons) the cluster's node, with a reason for the syncer.
func (e *operatorEnv) cordon(t testing.TB, on bool, reason string) {
	t.Helper()
	ann := map[string]any{wellknown.AnnotationCordonReason: nil}
	if reason != "" {
		ann[wellknown.AnnotationCordonReason] = reason
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}, "metadata": map[string]any{"annotations": ann}})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.NodeName}}
	if err := e.c.Patch(context.Background(), node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("cordon %v: %v", on, err)
	}
}

// deleteNamespace removes the test's namespace and waits until it is gone, so that the
// pods' processes and volumes are gone before the environment stops.
func (e *operatorEnv) deleteNamespace(t testing.TB) { e.removeNamespace(t, e.ns) }

// removeNamespace deletes ns's SlurmClusters, waits until their pods are gone, then deletes ns
// and waits for that. Deleting the namespace first would be as correct but slower: the namespace
// controller, finding pods still terminating, looks again only after their grace period
// (slurmctld's is 120 s) even when they exit in seconds, and backs off on the finalizers of
// NodeSets and SlurmClusters; CI once measured over three minutes for one namespace. Other pods
// (a test's one-shot pod, sunk-scheduler of the sunk release) go with the namespace.
func (e *operatorEnv) removeNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := e.c.DeleteAllOf(ctx, &sunkv1.SlurmCluster{}, client.InNamespace(ns)); err != nil && !meta.IsNoMatchError(err) {
		t.Errorf("deleting the SlurmClusters of %s: %v", ns, err)
	}
	const podsGoneWithin = 4 * time.Minute
	if err := wait.Until(podsGoneWithin, pollEvery, func() error {
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{wellknown.LabelCluster}); err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left, e.g. %s", n, pods.Items[0].Name)
		}
		return nil
	}); err != nil {
		// A deletion that hangs is a failure of its own, after the test body passed: say so
		// before the diagnostics (the run's report shows a failed test's lines up to them), then
		// show why.
		t.Errorf("Slurm pods of %s gone: not within %v: %v", ns, podsGoneWithin, err)
		e.dumpNamespaceOf(t, ns)
		t.FailNow()
	}
	if err := e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting namespace %s: %v", ns, err)
		return
	}
	poll(t, 2*time.Minute, "namespace "+ns+" deleted", func() error {
		err := e.c.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{})
		if err == nil {
			return fmt.Errorf("still terminating")
		}
		return client.IgnoreNotFound(err)
	})
	t.Logf("namespace %s removed in %s", ns, time.Since(start).Round(time.Second))
}

func (e *operatorEnv) dumpNamespace(t testing.TB) { e.dumpNamespaceOf(t, e.ns) }

// diagnosticsMarker begins the lines dumpNamespaceOf logs. hack/test.sh's report of a failed
// run shows each failed test's last lines before it: the failure's message, not the tail of the
// diagnostics or of the cleanup after them.
const diagnosticsMarker = "[diagnostics] what explains the failure above, in namespace "

// dumpNamespaceOf logs what explains a failure in ns: its pods (with their finalizers and
// deletion, for a deletion that hangs), their containers' logs, SlurmClusters, NodeSets and
// events.
func (e *operatorEnv) dumpNamespaceOf(t testing.TB, ns string) {
	ctx := context.Background()
	t.Log(diagnosticsMarker + ns)
	var pods corev1.PodList
	_ = e.c.List(ctx, &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		t.Logf("pod %s: phase %s, deleting since %v, finalizers %v, conditions %v, containers %+v", p.Name, p.Status.Phase,
			p.DeletionTimestamp, p.Finalizers, p.Status.Conditions, p.Status.ContainerStatuses)
		for _, c := range p.Spec.Containers {
			logs, err := e.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptr.To(int64(40))}).DoRaw(ctx)
			t.Logf("logs of %s/%s (%v):\n%s", p.Name, c.Name, err, logs)
		}
		// A container that restarted: its last run's end is what explains it (a slurmctld that
		// died of SIGSEGV under load left nothing to read once it had restarted).
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount == 0 {
				continue
			}
			logs, err := e.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true, TailLines: ptr.To(int64(80))}).DoRaw(ctx)
			t.Logf("logs of %s/%s before its last restart (%v):\n%s", p.Name, cs.Name, err, logs)
		}
	}
	var sc sunkv1.SlurmClusterList
	_ = e.c.List(ctx, &sc, client.InNamespace(ns))
	for _, s := range sc.Items {
		t.Logf("SlurmCluster %s: deleting since %v, finalizers %v, status %+v", s.Name, s.DeletionTimestamp, s.Finalizers, s.Status)
	}
	var nss sunkv1.NodeSetList
	_ = e.c.List(ctx, &nss, client.InNamespace(ns))
	for _, s := range nss.Items {
		t.Logf("NodeSet %s: deleting since %v, finalizers %v, status %+v", s.Name, s.DeletionTimestamp, s.Finalizers, s.Status)
	}
	var events corev1.EventList
	_ = e.c.List(ctx, &events, client.InNamespace(ns))
	for _, ev := range events.Items {
		t.Logf("event %s %s/%s %s ×%d: %s", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Count, ev.Message)
	}
}

// parallel lets a test run beside the other parallel ones (go test -parallel): it keeps to its own
// namespace, its own operator and its own Slurm cluster. A test that changes the one shared
// Kubernetes node must not call it: a cordon, a kubectl drain, sunk-scheduler's node lock (a
// NoSchedule taint) or kwok nodes would hold other tests' pods off the node or evict them. Those
// run one at a time, in a go test of their own after the parallel ones (hack/test.sh picks them
// out as the tests whose first line is not parallel(t)).
func parallel(t *testing.T) { t.Parallel() }

// poll calls f until it returns nil or the timeout passes.
func poll(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	wait.For(t, what, timeout, pollEvery, f)
}

// pollEvery is how often poll looks: many conditions are read by a command in a pod (squeue,
// sinfo), and each look is a runc exec, about as costly as starting a container; three tests
// at a time looking every second kept the 2-core machine's runc busy.
const pollEvery = 2 * time.Second

// createReady creates a SlurmCluster and waits until it is Ready.
func (e *operatorEnv) createReady(t testing.TB, sc *sunkv1.SlurmCluster) {
	t.Helper()
	// Until the CRDs this test installed are served (see startOperator's client).
	poll(t, 30*time.Second, "SlurmCluster created", func() error {
		err := e.c.Create(context.Background(), sc)
		if err != nil && !strings.Contains(err.Error(), "unknown field") {
			t.Fatal(err)
		}
		return err
	})
	start := time.Now()
	// 40-65 s on a quiet 2-core machine, three clusters starting at once. CI's host has run the
	// tests 3-6x slower (TestLDAPUserJobAndAccounting 895 s against 150, 2026-12-02), where
	// TestAuthKeyRotation failed at 428 s: about this wait's former 6 minutes plus the cleanup.
	// The Ready condition in the failure message tells a slow host from a stuck cluster.
	poll(t, 10*time.Minute, "SlurmCluster Ready", func() error {
		c := meta.FindStatusCondition(e.cluster(t, sc.Name).Status.Conditions, sunkv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	t.Logf("SlurmCluster %s Ready %s after creation", sc.Name, time.Since(start).Round(time.Second))
}

// update reads o afresh, applies mutate and writes it, again on a conflict: the operator
// writes the object's status and finalizers meanwhile, each a new resourceVersion.
func (e *operatorEnv) update(t testing.TB, o client.Object, mutate func()) {
	t.Helper()
	key := client.ObjectKeyFromObject(o)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.c.Get(context.Background(), key, o); err != nil {
			return err
		}
		mutate()
		return e.c.Update(context.Background(), o)
	}); err != nil {
		t.Fatalf("updating %T %s: %v", o, key, err)
	}
}

// sh runs a shell command in a pod's container.
func (e *operatorEnv) sh(t testing.TB, pod, container, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e.exec.Exec(ctx, e.ns, pod, container, "sh", "-c", script)
}

func (e *operatorEnv) cluster(t testing.TB, name string) *sunkv1.SlurmCluster {
	sc := &sunkv1.SlurmCluster{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// podOf returns the one running pod of a component, waiting up to a minute for it: kubelet
// reports a pod Running a moment after its container started, and slurmd may register (sinfo
// shows the node idle) before that.
func (e *operatorEnv) podOf(t testing.TB, cluster, component string) corev1.Pod {
	t.Helper()
	var running corev1.Pod
	poll(t, time.Minute, "a running "+component+" pod", func() error {
		var pods corev1.PodList
		if err := e.c.List(context.Background(), &pods, client.InNamespace(e.ns),
			client.MatchingLabels{wellknown.LabelCluster: cluster, wellknown.LabelComponent: component}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning {
				running = p
				return nil
			}
		}
		return fmt.Errorf("none among %d pods", len(pods.Items))
	})
	return running
}

// sandboxProbeLua refuses a job named lua-sandbox, telling the submitter which of slurmctld's
// powers the script reached when Slurm called it (render.JobSubmitLua's sandbox: none).
const sandboxProbeLua = `function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.name ~= "lua-sandbox" then return slurm.SUCCESS end
  local reached = {}
  for _, name in ipairs({"io", "require", "debug", "package", "loadstring", "getfenv", "dofile"}) do
    if _G[name] ~= nil then reached[#reached + 1] = name end
  end
  if os.execute ~= nil or os.getenv ~= nil then reached[#reached + 1] = "os" end
  slurm.log_user("lua sandbox reached [%s], clock %s", table.concat(reached, ","), type(os.time()))
  return slurm.ERROR
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end
`

// TestSlurmClusterOnTheLocalCluster applies a SlurmCluster with managed accounting, a
// prolog and a job_submit.lua, and checks it from a user's seat: sinfo and scontrol ping
// answer in the login pod, the Lua script runs in its sandbox in slurmctld, a job runs after
// the prolog and shows in sacct, and a new partition reaches slurmctld without restarting it.
func TestSlurmClusterOnTheLocalCluster(t *testing.T) {
	e := startOperator(t)
	ctx := context.Background()
	if err := e.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "site-scripts"},
		Data: map[string]string{"marker.sh": "#!/bin/sh\necho \"prolog ran for job $SLURM_JOB_ID\" > /tmp/sunk-prolog-$SLURM_JOB_ID\n"}}); err != nil {
		t.Fatal(err)
	}
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "e2e"},
		Spec: sunkv1.SlurmClusterSpec{
			SlurmVersion:    testSlurmVersion,
			Image:           slurmImage,
			ImagePullPolicy: corev1.PullNever,
			Accounting:      sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged},
			Partitions:      []sunkv1.PartitionSpec{{Name: "main", Default: true}},
			Prolog: []sunkv1.Script{{Name: "marker", ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "site-scripts"}, Key: "marker.sh"}}},
			JobSubmitLua: sandboxProbeLua,
		},
	}
	e.createReady(t, sc)

	login := e.podOf(t, "e2e", wellknown.ComponentLogin).Name
	out, err := e.sh(t, login, "login", "scontrol ping && sinfo")
	if err != nil || !strings.Contains(out, "is UP") || !strings.Contains(out, "main*") {
		t.Fatalf("scontrol ping && sinfo in the login pod: %v\n%s", err, out)
	}
	// sshd serves the cluster's one host key, the operator's Secret, and no key made in the pod
	// (which would change at the pod's next start). Only the keys' paths are compared: sshd -T
	// writes the keyword in lower case, Debian's OpenSSH 10 as HostKey.
	hostKey := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "e2e-ssh-host-key"}, hostKey); err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParsePrivateKey(hostKey.Data["ssh_host_ed25519_key"])
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey())))
	out, err = e.sh(t, login, "login", "sshd -T | grep -i '^hostkey ' | cut -d' ' -f2; cut -d' ' -f1,2 /run/sunk/ssh/ssh_host_ed25519_key.pub")
	if err != nil || strings.TrimSpace(out) != "/run/sunk/ssh/ssh_host_ed25519_key\n"+want {
		t.Fatalf("the login pod's sshd host keys: %v\n%s\nwant the one of Secret e2e-ssh-host-key, %s", err, out, want)
	}
	// As a plain user: the script, which slurmctld runs beside the cluster's keys, reaches
	// neither files nor commands nor slurmctld's globals; Slurm refuses the job as it says.
	out, _ = e.sh(t, login, "login", testenv.AsUser("sbatch -J lua-sandbox --wrap true 2>&1"))
	if !strings.Contains(out, "lua sandbox reached [], clock number") {
		t.Fatalf("job_submit.lua's sandbox in slurmctld: sbatch said\n%s", out)
	}

	// A compute node joins through a one-node NodeSet and runs a job.
	if err := e.c.Create(ctx, &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "compute"},
		Spec:       sunkv1.NodeSetSpec{ClusterRef: "e2e", Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(1)), Image: slurmImage},
	}); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "compute node idle", func() error {
		out, err := e.sh(t, login, "login", "sinfo -h -N -o '%N %t'")
		if err != nil || !strings.Contains(out, "compute-0 idle") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	out, err = e.sh(t, login, "login", testenv.AsUser(`srun -N1 -J e2e-prolog sh -c 'echo job=$SLURM_JOB_ID; cat /tmp/sunk-prolog-$SLURM_JOB_ID'`))
	if err != nil {
		t.Fatalf("srun: %v\n%s", err, out)
	}
	// slurmctld messages srun at the short hostname srun reports, with its locks held; a name it
	// cannot resolve cost every srun from a login pod 10 s and stalled every other RPC as long.
	loginHost, err := e.sh(t, login, "login", "hostname -s")
	if err != nil {
		t.Fatalf("hostname in the login pod: %v\n%s", err, loginHost)
	}
	if out, err := e.sh(t, "e2e-controller-0", "slurmctld", "getent hosts "+strings.TrimSpace(loginHost)); err != nil {
		t.Fatalf("slurmctld's pod cannot resolve the login pod's hostname %q, as srun reports it: %v\n%s", strings.TrimSpace(loginHost), err, out)
	}
	m := regexp.MustCompile(`job=(\d+)\s+prolog ran for job (\d+)`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the job did not see its prolog's marker:\n%s", out)
	}
	jobID := m[1]
	poll(t, 2*time.Minute, "job in sacct", func() error {
		out, err := e.sh(t, login, "login", "sacct -n -X -P -j "+jobID+" -o JobID,JobName,State,ExitCode")
		if err != nil || !strings.Contains(out, jobID+"|e2e-prolog|COMPLETED|0:0") {
			return fmt.Errorf("sacct: %v %q", err, out)
		}
		return nil
	})

	// sunk-syncer: a cordon drains the Slurm node with the reason, the compute pod shows it,
	// and uncordon resumes it.
	e.cordon(t, true, "e2e maintenance")
	t.Cleanup(func() { e.cordon(t, false, "") })
	poll(t, time.Minute, "the cordon drains compute-0", func() error {
		// drained, or draining while the finished job's node is still COMPLETING
		out, err := e.sh(t, login, "login", "sinfo -h -N -o '%N|%T|%E'")
		if err != nil || !regexp.MustCompile(`compute-0\|drain(ed|ing)\|k8s: node cordoned \(e2e maintenance\)`).MatchString(out) {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	poll(t, 30*time.Second, "compute-0's pod mirrors the drain", func() error {
		p := &corev1.Pod{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "compute-0"}, p); err != nil {
			return err
		}
		if st := p.Annotations[wellknown.AnnotationSlurmState]; !strings.Contains(st, "drain") {
			return fmt.Errorf("pod annotation %s=%q", wellknown.AnnotationSlurmState, st)
		}
		return nil
	})
	e.cordon(t, false, "")
	poll(t, time.Minute, "uncordon resumes compute-0", func() error {
		out, err := e.sh(t, login, "login", "sinfo -h -N -o '%N|%T'")
		if err != nil || !strings.Contains(out, "compute-0|") || strings.Contains(out, "drain") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	if c := meta.FindStatusCondition(e.cluster(t, "e2e").Status.Conditions, sunkv1.ConditionNodesSynced); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("NodesSynced: %+v", c)
	}

	// A new partition reaches slurmctld by reconfigure: same pod, same container start.
	ctld := e.podOf(t, "e2e", wellknown.ComponentController)
	before := ctld.Status.ContainerStatuses[0]
	sc = e.cluster(t, "e2e")
	oldHash := sc.Status.ConfigHash
	e.update(t, sc, func() {
		sc.Spec.Partitions = append(sc.Spec.Partitions, sunkv1.PartitionSpec{Name: "added", MaxTime: "60"})
	})
	start := time.Now()
	poll(t, 3*time.Minute, "partition added", func() error {
		out, err := e.sh(t, login, "login", "sinfo -h -o %P")
		if err != nil || !strings.Contains(out, "added") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	t.Logf("new partition visible in sinfo %s after the spec change", time.Since(start).Round(time.Second))
	after := e.podOf(t, "e2e", wellknown.ComponentController)
	if after.UID != ctld.UID || after.Status.ContainerStatuses[0].RestartCount != before.RestartCount ||
		!after.Status.ContainerStatuses[0].State.Running.StartedAt.Equal(&before.State.Running.StartedAt) {
		t.Errorf("slurmctld was restarted: pod %s→%s, restarts %d→%d, started %v→%v", ctld.UID, after.UID,
			before.RestartCount, after.Status.ContainerStatuses[0].RestartCount, before.State.Running.StartedAt, after.Status.ContainerStatuses[0].State.Running)
	}
	poll(t, time.Minute, "status names the new configuration", func() error {
		if h := e.cluster(t, "e2e").Status.ConfigHash; h == oldHash || h == "" {
			return fmt.Errorf("configHash still %q", h)
		}
		return nil
	})
}
