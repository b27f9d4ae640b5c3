//go:build integration

// Package integration runs sunk-scheduler (kube-scheduler with the SunkSlurm plugin, in this
// process) against a real kube-apiserver (envtest) and the real Slurm of hack/env-slurm.sh.
// Nodes and compute pods are API objects only: binding needs no kubelet, and the compute pods
// stand for the Slurm test bed's slurmd nodes (a compute pod per Slurm node, as a NodeSet makes).
//
// The root module's test/testenv builds on controller-runtime for k8s.io 0.37, which this
// module (pinned to Kubernetes 1.33) cannot import; the little it needs is repeated here.
package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/configz"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/scheduler/plugin"
	"sunk.dev/sunk/test/wait"
)

const (
	schedulerName = "sunk-scheduler"
	computeNS     = "slurm"
	clusterName   = "c1"
	testNS        = "default"
)

// repoRoot is the sunk checkout: go test runs this package in scheduler/test/integration. Not
// the file's own path: hack/lib.sh builds with -trimpath, which leaves no checkout path in it.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", "..", ".."))
}

func cacheDir() string {
	if d := os.Getenv("SUNK_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "sunk")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sunk")
}

func stateDir() string {
	if d := os.Getenv("SUNK_STATE"); d != "" {
		return d
	}
	return filepath.Join(cacheDir(), "state")
}

// slurmStateDir is the state directory of the test bed SUNK_SLURM_VERSION selects (hack/lib.sh;
// test/testenv's SlurmStateDir, which this module cannot import): slurm for 24.11, slurm-26.05.
func slurmStateDir() string {
	if v := os.Getenv("SUNK_SLURM_VERSION"); v != "" && v != "24.11" {
		return filepath.Join(stateDir(), "slurm-"+v)
	}
	return filepath.Join(stateDir(), "slurm")
}

// slurmEnv is hack/env-slurm.sh's env.json.
type slurmEnv struct {
	RESTURL     string   `json:"restURL"`
	JWTKeyFile  string   `json:"jwtKeyFile"`
	User        string   `json:"user"`
	Nodes       []string `json:"nodes"`
	ExecCommand []string `json:"execCommand"`
}

func (e *slurmEnv) exec(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(e.ExecCommand[0], append(append([]string{}, e.ExecCommand[1:]...), args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// env is one test's world: an apiserver with nodes and compute pods, Slurm, and a way to start
// the scheduler.
type env struct {
	t          testing.TB
	ctx        context.Context
	cs         kubernetes.Interface
	slurm      *slurmEnv
	sc         slurm.Client
	dyn        dynamic.Interface
	kubeconfig string
	// markKeyFile is the schedulers' job mark key, one per process: a restarted scheduler
	// recognises the jobs of the one before, and no test counts an earlier test's jobs (still
	// listed for MinJobAge after they end) as untrusted.
	markKeyFile string
	hostOf      map[string]string // Slurm node → Kubernetes node
	// pollInterval of the plugin's Slurm lists (default 200ms).
	pollInterval string
	// gangTimeout of the plugin (default 10s).
	gangTimeout string
	// slurmURL is where the scheduler reaches slurmrestd (default the test bed's; a test puts
	// a fault proxy there).
	slurmURL string
	// nodeWatcherURL is the node watcher the scheduler follows nodes through (startNodeWatcher).
	nodeWatcherURL string
}

func setup(t testing.TB) *env {
	t.Helper()
	root := repoRoot()
	if out, err := exec.Command(filepath.Join(root, "hack", "env-slurm.sh"), "up").CombinedOutput(); err != nil {
		t.Fatalf("hack/env-slurm.sh up: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(slurmStateDir(), "env.json"))
	if err != nil {
		t.Fatalf("slurm env.json: %v", err)
	}
	se := &slurmEnv{}
	if err := json.Unmarshal(raw, se); err != nil {
		t.Fatal(err)
	}
	tokens, err := slurm.NewJWTSourceFromFile(se.User, se.JWTKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// The newest REST version both know: 26.05's slurmrestd no longer serves v0.0.41.
	sc, err := slurm.NewDiscovering(slurm.Config{URL: se.RESTURL, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}

	// The CRDs: the scheduler reads its SlurmCluster's spec.schedulerPolicy.
	te := &envtest.Environment{BinaryAssetsDirectory: filepath.Join(cacheDir(), "envtest"),
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	admin, err := te.AddUser(envtest.User{Name: "scheduler-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	fast := rest.CopyConfig(cfg) // the benchmark creates and deletes pods quickly
	fast.QPS, fast.Burst = 500, 1000
	cs := kubernetes.NewForConfigOrDie(fast)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	markKeyFile, err := markKey()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, cs: cs, slurm: se, sc: sc, kubeconfig: kubeconfig, markKeyFile: markKeyFile, hostOf: map[string]string{},
		nodeWatcherURL: startNodeWatcher(t)}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computeNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.dyn = dynamic.NewForConfigOrDie(cfg)
	e.createCluster()
	for _, sn := range se.Nodes {
		e.addComputeNode(sn)
	}
	t.Cleanup(e.cancelLeftoverJobs)
	return e
}

// testBedPartitions are the partitions of hack/env-slurm.sh's slurm.conf, as a SlurmCluster
// would declare them: the scheduler's policy judges preemption by their tiers.
var testBedPartitions = []sunkv1.PartitionSpec{
	{Name: "all", Default: true, PriorityTier: ptr.To[int32](1)},
	{Name: "urgent", PriorityTier: ptr.To[int32](10)},
	{Name: "requeue", PriorityTier: ptr.To[int32](1), ExtraConf: "PreemptMode=REQUEUE"},
	{Name: "bench", PriorityTier: ptr.To[int32](1), ExtraConf: "OverSubscribe=FORCE:100"},
}

// testsTenant lets the tests' namespace ask Slurm for anything.
var testsTenant = sunkv1.SchedulerTenant{Name: "tests", Namespaces: []string{testNS}, Partitions: []string{"*"}, Accounts: []string{"*"},
	QOS: []string{"*"}, Reservations: []string{"*"}, MaxPriority: ptr.To[int64](4294967294), Preempt: true}

// createCluster makes the SlurmCluster the scheduler schedules for (no operator runs here: it
// is only read), with the test bed's partitions and a policy of one tenant, the tests'.
func (e *env) createCluster() {
	e.t.Helper()
	sc := &sunkv1.SlurmCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: sunkv1.GroupVersion.String(), Kind: "SlurmCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: computeNS},
		Spec: sunkv1.SlurmClusterSpec{Image: "slurm", Partitions: testBedPartitions,
			Preemption:      sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio, Mode: sunkv1.PreemptionCancel},
			SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{testsTenant}}},
	}
	obj, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(sc)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.slurmClusters().Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating SlurmCluster %s/%s: %v", computeNS, clusterName, err)
	}
}

// setTenants replaces the SlurmCluster's scheduler policy tenants.
func (e *env) setTenants(tenants ...sunkv1.SchedulerTenant) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"schedulerPolicy": sunkv1.SchedulerPolicy{Tenants: tenants}}})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.slurmClusters().Patch(e.ctx, clusterName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("setting the scheduler policy: %v", err)
	}
}

func (e *env) slurmClusters() dynamic.ResourceInterface {
	return e.dyn.Resource(sunkv1.GroupVersion.WithResource("slurmclusters")).Namespace(computeNS)
}

// markKey writes the process's job mark key once.
var markKey = sync.OnceValues(func() (string, error) {
	f, err := os.CreateTemp("", "sunk-scheduler-mark-*.key")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.WriteString(rand.Text() + rand.Text())
	return f.Name(), err
})

func TestMain(m *testing.M) {
	code := m.Run()
	if f, err := markKey(); err == nil {
		_ = os.Remove(f)
	}
	os.Exit(code)
}

// addComputeNode makes Kubernetes node k8s-<slurmNode> and, on it, the compute pod of Slurm
// node slurmNode.
func (e *env) addComputeNode(slurmNode string) {
	node := "k8s-" + slurmNode
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/hostname": node}},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		}}
	created, err := e.cs.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	created.Status = n.Status
	if created, err = e.cs.CoreV1().Nodes().UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// The apiserver's TaintNodesByCondition admission gives a new node the not-ready taint; with
	// no node lifecycle controller here to lift it, the test does.
	created.Spec.Taints = nil
	if _, err := e.cs.CoreV1().Nodes().Update(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: slurmNode, Namespace: computeNS, Labels: map[string]string{
			"sunk.dev/cluster": clusterName, "sunk.dev/component": "compute", "sunk.dev/slurm-node": slurmNode}},
		Spec: v1.PodSpec{NodeName: node, Hostname: slurmNode, Containers: []v1.Container{{Name: "slurmd", Image: "slurmd"}}},
	}
	if _, err := e.cs.CoreV1().Pods(computeNS).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.hostOf[slurmNode] = node
}

// cancelLeftoverJobs cancels the test's placeholder jobs (and any sbatch job it named
// "sunk-sched-test") so that the shared test bed is left idle.
func (e *env) cancelLeftoverJobs() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := e.sc.ListJobs(ctx, time.Time{})
	if err != nil {
		e.t.Errorf("listing jobs for cleanup: %v", err)
		return
	}
	for _, j := range l.Jobs {
		if (isPlaceholder(&j) || j.Name == "sunk-sched-test") && !finished(&j) {
			if err := e.sc.CancelJob(ctx, j.ID); err != nil && !isNotFound(err) {
				e.t.Errorf("cancelling leftover job %d: %v", j.ID, err)
			}
		}
	}
}

// isPlaceholder: the comment is a placeholder job's (a pod's or a gang's).
func isPlaceholder(j *slurm.Job) bool {
	return strings.HasPrefix(j.Comment, "sunk-pod:") || strings.HasPrefix(j.Comment, "sunk-gang:")
}

func finished(j *slurm.Job) bool {
	switch j.BaseState() {
	case "PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED":
		return false
	}
	return true
}

const configTemplate = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: %q, qps: 500, burst: 1000}
percentageOfNodesToScore: 100
profiles:
- schedulerName: sunk-scheduler
  plugins:
    preEnqueue: {enabled: [{name: SunkSlurm}]}
    preFilter: {enabled: [{name: SunkSlurm}]}
    filter: {enabled: [{name: SunkSlurm}]}
    reserve: {enabled: [{name: SunkSlurm}]}
    permit: {enabled: [{name: SunkSlurm}]}
    preBind: {enabled: [{name: SunkSlurm}]}
    postBind: {enabled: [{name: SunkSlurm}]}
    bind: {enabled: [{name: SunkSlurm}], disabled: [{name: DefaultBinder}]}
  pluginConfig:
  - name: SunkSlurm
    args: {slurmURL: %q, slurmUser: %q, jwtKeyFile: %q, markKeyFile: %q, cluster: %q, namespace: %q, pollInterval: %s, nodeWatcherURL: %q, gangTimeout: %s}
%s`

// startScheduler runs sunk-scheduler in this process until the returned stop is called (or the
// test ends). extraProfiles is appended to the profiles list.
func (e *env) startScheduler(extraProfiles string) (stop func()) {
	e.t.Helper()
	cfgFile := filepath.Join(e.t.TempDir(), "config.yaml")
	poll := e.pollInterval
	if poll == "" {
		poll = "200ms"
	}
	gangTimeout := e.gangTimeout
	if gangTimeout == "" {
		gangTimeout = "10s"
	}
	slurmURL := e.slurmURL
	if slurmURL == "" {
		slurmURL = e.slurm.RESTURL
	}
	cfg := fmt.Sprintf(configTemplate, e.kubeconfig, slurmURL, e.slurm.User, e.slurm.JWTKeyFile, e.markKeyFile, clusterName, computeNS, poll, e.nodeWatcherURL, gangTimeout, extraProfiles)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	opts := options.NewOptions()
	opts.ConfigFile = cfgFile
	opts.SecureServing.BindPort = 0
	ctx, cancel := context.WithCancel(e.ctx)
	cc, sched, err := app.Setup(ctx, opts, app.WithPlugin(plugin.Name, plugin.New))
	if err != nil {
		cancel()
		e.t.Fatalf("scheduler setup: %v", err)
	}
	// app.Run registers the configuration with configz, once per process; a test may start
	// several schedulers.
	configz.Delete("componentconfig")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			e.t.Errorf("scheduler: %v", err)
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.t.Errorf("scheduler did not stop within 30s")
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// eventually polls cond every 100ms until it returns true or the deadline passes.
func (e *env) eventually(what string, timeout time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	err := wait.Until(timeout, 100*time.Millisecond, func() error {
		if ok, state := cond(); !ok {
			return errors.New(state)
		}
		return nil
	})
	if err != nil {
		queue, _ := exec.Command(e.slurm.ExecCommand[0], append(append([]string{}, e.slurm.ExecCommand[1:]...),
			"squeue", "-a", "-t", "all", "-o", "%i %P %j %T %r %N %S")...).CombinedOutput()
		e.t.Fatalf("timed out after %v waiting for %s; last: %v\nSlurm queue:\n%s", timeout, what, err, queue)
	}
}

type podOpt func(*v1.Pod)

func withAnnotations(kv ...string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// notOnNode keeps the pod off a Kubernetes node by node affinity (a Kubernetes filter).
func notOnNode(node string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpNotIn, Values: []string{node}}}}}}}}
	}
}

func inNamespace(ns string) podOpt { return func(p *v1.Pod) { p.Namespace = ns } }

func onNode(node string) podOpt {
	return func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node} }
}

func (e *env) createPod(name string, opts ...podOpt) *v1.Pod {
	e.t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: v1.PodSpec{SchedulerName: schedulerName, Containers: []v1.Container{{Name: "app", Image: "app",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("100Mi")}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	created, err := e.cs.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

func (e *env) getPod(name string) *v1.Pod {
	e.t.Helper()
	p, err := e.cs.CoreV1().Pods(testNS).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitBound waits until the pod is bound and returns it.
func (e *env) waitBound(name string, timeout time.Duration) *v1.Pod {
	e.t.Helper()
	var p *v1.Pod
	e.eventually("pod "+name+" bound", timeout, func() (bool, string) {
		p = e.getPod(name)
		return p.Spec.NodeName != "", scheduledCondition(p)
	})
	return p
}

func scheduledCondition(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return fmt.Sprintf("PodScheduled=%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no PodScheduled condition"
}

// jobOfPod is the Slurm job the scheduler recorded on a bound pod.
func (e *env) jobOfPod(p *v1.Pod) *slurm.Job {
	e.t.Helper()
	var id uint32
	if _, err := fmt.Sscan(p.Annotations[wellknown.AnnotationJob], &id); err != nil {
		e.t.Fatalf("pod %s has no %s annotation: %v", p.Name, wellknown.AnnotationJob, err)
	}
	return e.job(id)
}

func (e *env) job(id uint32) *slurm.Job {
	e.t.Helper()
	j, err := e.sc.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetJob(%d): %v", id, err)
	}
	return j
}

// jobsNamed lists the placeholder jobs with this job name (a gang's is sunk-gang-<ns>-<gang>).
func (e *env) jobsNamed(name string) []slurm.Job {
	e.t.Helper()
	l, err := e.sc.ListJobs(e.ctx, time.Time{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []slurm.Job
	for _, j := range l.Jobs {
		if isPlaceholder(&j) && j.Name == name {
			out = append(out, j)
		}
	}
	return out
}

// jobsNaming lists the Slurm jobs whose comment names a pod UID.
func (e *env) jobsNaming(uid string) []slurm.Job {
	e.t.Helper()
	l, err := e.sc.ListJobs(e.ctx, time.Time{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []slurm.Job
	for _, j := range l.Jobs {
		if strings.HasPrefix(j.Comment, "sunk-pod:") && strings.Contains(j.Comment, uid) {
			out = append(out, j)
		}
	}
	return out
}

// waitJobState waits until the job's base state is one of states.
func (e *env) waitJobState(id uint32, timeout time.Duration, states ...string) *slurm.Job {
	e.t.Helper()
	var j *slurm.Job
	e.eventually(fmt.Sprintf("job %d in %v", id, states), timeout, func() (bool, string) {
		j = e.job(id)
		for _, s := range states {
			if j.BaseState() == s {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v %s", j.State, j.StateReason)
	})
	return j
}

// waitEvent waits for an event about the pod with the reason whose note contains text.
func (e *env) waitEvent(pod *v1.Pod, reason, text string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("event %s %q on %s", reason, text, pod.Name), timeout, func() (bool, string) {
		l, err := e.cs.EventsV1().Events(pod.Namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen bytes.Buffer
		for _, ev := range l.Items {
			if ev.Regarding.UID != pod.UID {
				continue
			}
			fmt.Fprintf(&seen, "[%s %s] ", ev.Reason, ev.Note)
			if ev.Reason == reason && strings.Contains(ev.Note, text) {
				return true, ""
			}
		}
		return false, seen.String()
	})
}

func isNotFound(err error) bool { return errors.Is(err, slurm.ErrNotFound) }
