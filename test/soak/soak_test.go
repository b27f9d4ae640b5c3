//go:build soak

package soak

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/test/testenv"
)

// The demo's names (hack/demo.sh): release and SlurmCluster "demo" in namespace slurm, NodeSet
// "compute", sunk's release "sunk" in sunk-system.
const (
	slurmNS      = "slurm"
	sunkNS       = "sunk-system"
	clusterName  = "demo"
	sunkRelease  = "sunk"
	samplePeriod = 10 * time.Second
	bigScale     = 40
	smallScale   = 3
	maxConns     = 8
	personNode   = "compute-1" // exists at both scales
	busybox      = "docker.io/library/busybox:local"
	metricsPort  = 8080  // charts/sunk metrics.port
	schedPort    = 10259 // kube-scheduler's secure port
	restPort     = 6820
)

// component is a process the soak samples and kills once.
type component struct {
	name, ns, selector, comm string
	metrics                  string // "http", "https" or "" (no Prometheus endpoint)
}

var (
	operator   = component{"operator", sunkNS, "app.kubernetes.io/instance=sunk,app.kubernetes.io/component=operator", "sunk-operator", "http"}
	syncerC    = component{"syncer", sunkNS, "app.kubernetes.io/instance=sunk,app.kubernetes.io/component=syncer", "sunk-syncer", "http"}
	scheduler  = component{"scheduler", slurmNS, "app.kubernetes.io/instance=sunk,app.kubernetes.io/component=scheduler", "sunk-scheduler", "https"}
	slurmrestd = component{"slurmrestd", slurmNS, "sunk.dev/cluster=demo,sunk.dev/component=restapi", "slurmrestd", ""}
	slurmctld  = component{"slurmctld", slurmNS, "sunk.dev/cluster=demo,sunk.dev/component=controller", "slurmctld", ""}
	sunkComps  = []component{operator, syncerC, scheduler}
	// The kill order: Slurm's side first, then sunk's; all in the first half, so that the
	// second half (RSS and goroutine growth) sees no restart.
	killOrder = []component{slurmrestd, slurmctld, syncerC, operator, scheduler}
)

// window is a span of time: a kill (kill → Ready again + one sample period) or a cordon.
type window struct {
	what       string
	start, end time.Time // end zero while open
}

func (w window) covers(t time.Time) bool {
	return !t.Before(w.start) && (w.end.IsZero() || !t.After(w.end))
}

func (w window) overlaps(a, b time.Time) bool {
	return !b.Before(w.start) && (w.end.IsZero() || !a.After(w.end))
}

// compSample is one scrape of one sunk component: its counters' growth since the last scrape.
type compSample struct {
	ok         bool
	err        string
	rss, gor   float64
	rest       map[string]float64 // "endpoint|outcome" → requests since the last scrape
	latency    map[string]Histogram
	restSeries bool
}

type sample struct {
	t         time.Time
	comps     map[string]*compSample
	conns     map[string]int // component (or peer) → established connections to slurmrestd
	connErr   string
	nodes     []Node
	nodesErr  string
	phase     string
	k8sDrains []Node // drains with a k8s: reason in this sample
}

type readTick struct {
	t     time.Time
	dt    time.Duration
	state int // 1 readable, 0 unreadable, -1 not reporting (no gauge, syncer unreachable)
}

type soak struct {
	t     *testing.T
	ctx   context.Context
	cl    *testenv.ClusterEnv
	cs    kubernetes.Interface
	exec  *kube.PodExecer
	httpc *http.Client
	token string
	dir   string
	dur   time.Duration
	start time.Time

	mu         sync.Mutex
	phase      string
	windows    []window // kills
	cordons    []window
	samples    []sample
	ticks      []readTick
	counters   map[string]*Counters
	jobs       map[string]Job
	firstSeen  map[string]time.Time
	submitted  map[string]string // job id → kind, from sbatch/srun
	cancelled  map[string]string // job id → why the soak cancelled it
	submitErrs []string
	timeline   []string
	figures    map[string]float64
	scaleUpAt  time.Time // scale-up finished
	scaleInAt  time.Time // scale-in started
	lastKillAt time.Time
}

// TestSoak is issue 14's soak: the demo's cluster under churn and faults for DURATION.
func TestSoak(t *testing.T) {
	dur := 30 * time.Minute
	if v := os.Getenv("DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("DURATION=%q: %v", v, err)
		}
		dur = d
	}
	s := setup(t, dur)
	s.run()
}

func setup(t *testing.T, dur time.Duration) *soak {
	cl := testenv.Cluster(t)
	ex, err := kube.NewPodExecer(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("SUNK_SOAK_DIR")
	if dir == "" {
		dir = filepath.Join(testenv.CacheDir(), "soak", time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &soak{
		t: t, ctx: context.Background(), cl: cl, cs: cl.Clientset, exec: ex, dir: dir, dur: dur,
		httpc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			// kube-scheduler's self-signed serving certificate, on this machine's pod network.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}},
		counters: map[string]*Counters{}, jobs: map[string]Job{}, firstSeen: map[string]time.Time{},
		submitted: map[string]string{}, cancelled: map[string]string{}, figures: map[string]float64{},
	}
	for _, c := range sunkComps {
		s.counters[c.name] = &Counters{}
	}

	// The demo must be up: make soak runs hack/demo.sh first.
	if _, err := s.podOf(slurmctld); err != nil {
		t.Fatalf("no demo cluster (run `make demo` or `make soak`): %v", err)
	}
	out, err := s.login("scontrol show config | grep -E '^MinJobAge'")
	if err != nil {
		t.Fatalf("scontrol show config: %v", err)
	}
	// Without accounting (the demo's mode None) end states come from slurmctld, sampled every
	// 10 s: ended jobs must stay in its table for several samples.
	if m := regexp.MustCompile(`=\s*(\d+)`).FindStringSubmatch(out); m == nil {
		t.Fatalf("MinJobAge: %q", out)
	} else if age, _ := strconv.Atoi(m[1]); time.Duration(age)*time.Second < 3*samplePeriod {
		t.Fatalf("MinJobAge %ds is shorter than three samples: the soak would miss end states", age)
	}
	// The demo's NodeSet has 3 nodes; after an earlier run hack/demo.sh's upgrade may still be
	// draining the rest.
	s.poll(5*time.Minute, 2*time.Second, fmt.Sprintf("the demo at %d Slurm nodes", smallScale), func() error {
		nodes, err := s.nodes()
		if err == nil && len(nodes) != smallScale {
			err = fmt.Errorf("Slurm nodes %v", nodes)
		}
		return err
	})

	// sunk-scheduler for the demo cluster, as a user enables it (docs/scheduler.md).
	s.logf("enabling sunk-scheduler for %s/%s", slurmNS, clusterName)
	s.helm("upgrade", sunkRelease, "charts/sunk", "-n", sunkNS, "--reuse-values", "--wait", "--timeout", "5m",
		"--set", "scheduler.enabled=true", "--set", "scheduler.cluster.name="+clusterName, "--set", "scheduler.cluster.namespace="+slurmNS)
	t.Cleanup(func() {
		if _, err := s.helmErr("upgrade", sunkRelease, "charts/sunk", "-n", sunkNS, "--reuse-values", "--wait", "--timeout", "5m",
			"--set", "scheduler.enabled=false"); err != nil {
			t.Errorf("disabling sunk-scheduler again: %v", err)
		}
	})
	// Runs before the scheduler is disabled (cleanups run last first): the soak's pods go
	// while sunk-scheduler can still cancel their jobs and lift its node lock. A lock left on the
	// node anyway (sunk-scheduler gone first) is lifted here, or it would keep every pod that
	// does not tolerate it, sunk-scheduler's own included, off the only node.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = s.cs.CoreV1().Pods(slurmNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "sunk.dev/soak=true"})
		s.poll(2*time.Minute, time.Second, "the soak's sunk-scheduler pods gone and the node lock lifted", func() error {
			pods, err := s.cs.CoreV1().Pods(slurmNS).List(ctx, metav1.ListOptions{LabelSelector: "sunk.dev/soak=true"})
			if err != nil || len(pods.Items) > 0 {
				return fmt.Errorf("pods left: %v %v", len(pods.Items), err)
			}
			n, err := s.cs.CoreV1().Nodes().Get(ctx, s.cl.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, tt := range n.Spec.Taints {
				if tt.Key == "sunk.dev/slurm-job" {
					return fmt.Errorf("node lock %s=%s still on %s", tt.Key, tt.Value, n.Name)
				}
			}
			return nil
		})
	})
	s.token = s.metricsToken()
	// Whatever happens, the node ends uncordoned.
	t.Cleanup(func() {
		if err := s.cordon(false); err != nil {
			t.Errorf("uncordoning %s: %v", s.cl.NodeName, err)
		}
	})
	return s
}

// run is the soak: the director's script of churn and faults, with the sampler, the syncer's
// readability poll and the job stream around it.
func (s *soak) run() {
	s.start = time.Now()
	ctx, stop := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	reported := false
	defer func() {
		stop()
		wg.Wait()
		if !reported { // a step failed the test: still show what was measured
			s.logf("the soak stopped early; the report covers what was sampled")
			s.report()
		}
	}()

	wg.Add(2)
	go func() { defer wg.Done(); s.sampler(ctx) }()
	go func() { defer wg.Done(); s.readablePoll(ctx) }()
	jobsCtx, stopJobs := context.WithCancel(ctx)
	jobsDone := make(chan struct{})
	go func() { defer close(jobsDone); s.jobStream(jobsCtx) }()

	s.setPhase("scale-up")
	s.scale(bigScale, 15*time.Minute)
	s.mu.Lock()
	s.scaleUpAt = time.Now()
	s.mu.Unlock()
	s.figures["scale_up_s"] = time.Since(s.start).Seconds()

	// Churn: every action at least once, the kills spread over the rest of the first half,
	// churn actions between them until 80 % of DURATION.
	s.setPhase("churn")
	actions := []struct {
		name string
		f    func()
	}{{"cordon", s.cordonCycle}, {"person-drain", s.personDrain}, {"scheduler-pods", s.schedulerPods}}
	churnUntil := s.start.Add(s.dur * 8 / 10)
	killsBy := s.start.Add(s.dur / 2)
	var nextKill time.Time // set once every churn action ran once
	next, kill := 0, 0
	for {
		now := time.Now()
		if next >= len(actions) && kill == len(killOrder) && !now.Before(churnUntil) {
			break
		}
		if next >= len(actions) && kill < len(killOrder) && !now.Before(nextKill) {
			s.kill(killOrder[kill])
			kill++
			// The remaining kills evenly over what is left of the first half.
			if left := len(killOrder) - kill; left > 0 {
				nextKill = time.Now().Add(time.Until(killsBy) / time.Duration(left+1))
			}
			continue
		}
		a := actions[next%len(actions)]
		next++
		s.logf("churn: %s", a.name)
		a.f()
		s.pace(ctx, 5*time.Second)
	}
	s.mu.Lock()
	s.scaleInAt = time.Now()
	s.mu.Unlock()

	s.setPhase("scale-in")
	t0 := time.Now()
	s.scale(smallScale, 10*time.Minute)
	s.figures["scale_in_s"] = time.Since(t0).Seconds()

	s.setPhase("drain-jobs")
	stopJobs()
	<-jobsDone
	s.waitJobsEnded(5 * time.Minute)
	s.setPhase("final")
	s.takeSample() // the last state, taken synchronously
	stop()
	wg.Wait()
	s.figures["total_s"] = time.Since(s.start).Seconds()
	reported = true
	s.report()
}

// pace waits d between churn actions: a schedule, not a synchronisation.
func (s *soak) pace(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (s *soak) setPhase(p string) {
	s.mu.Lock()
	s.phase = p
	s.mu.Unlock()
	s.logf("phase %s", p)
}

func (s *soak) logf(format string, args ...any) {
	msg := fmt.Sprintf("[%5.0fs] ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	if s.start.IsZero() {
		msg = "[setup] " + fmt.Sprintf(format, args...)
	}
	s.mu.Lock()
	s.timeline = append(s.timeline, msg)
	s.mu.Unlock()
	s.t.Log(msg)
}

// poll calls f every interval until it returns nil, or fails the test after timeout.
func (s *soak) poll(timeout, every time.Duration, what string, f func() error) time.Duration {
	s.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(every)
	}
}

// ---- the cluster ----

func (s *soak) pods(c component) ([]corev1.Pod, error) {
	l, err := s.cs.CoreV1().Pods(c.ns).List(s.ctx, metav1.ListOptions{LabelSelector: c.selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// podOf is the component's running pod.
func (s *soak) podOf(c component) (*corev1.Pod, error) {
	pods, err := s.pods(c)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running %s pod (%s in %s)", c.name, c.selector, c.ns)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pid finds the component's process on this host: its name in a container of its pod.
func (s *soak) pid(c component) (int, *corev1.Pod, error) {
	p, err := s.podOf(c)
	if err != nil {
		return 0, nil, err
	}
	for _, st := range p.Status.ContainerStatuses {
		_, id, ok := strings.Cut(st.ContainerID, "://")
		if !ok || st.State.Running == nil {
			continue
		}
		pids, err := FindProcess("/proc", id, c.comm)
		if err != nil {
			return 0, p, err
		}
		if len(pids) > 0 {
			sort.Ints(pids)
			return pids[0], p, nil
		}
	}
	return 0, p, fmt.Errorf("no %s process in pod %s", c.comm, p.Name)
}

func (s *soak) loginPod() (string, error) {
	p, err := s.podOf(component{"login", slurmNS, "sunk.dev/cluster=demo,sunk.dev/component=login", "", ""})
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

// login runs a shell command in the login pod, as a user at the login node would.
func (s *soak) login(script string) (string, error) {
	return s.loginCtx(s.ctx, 2*time.Minute, script)
}

func (s *soak) loginCtx(ctx context.Context, timeout time.Duration, script string) (string, error) {
	pod, err := s.loginPod()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.exec.Exec(ctx, slurmNS, pod, "login", "sh", "-c", script)
}

func (s *soak) nodes() ([]Node, error) {
	out, err := s.login("sinfo -h -N -o '%N|%T|%E'")
	if err != nil {
		return nil, err
	}
	return ParseNodes(out), nil
}

func (s *soak) helmErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testenv.CacheDir(), "bin", "helm"), args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.cl.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (s *soak) helm(args ...string) string {
	s.t.Helper()
	out, err := s.helmErr(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// metricsToken is a ServiceAccount token allowed GET /metrics: kube-scheduler authorizes its
// /metrics (delegated, TokenReview + SubjectAccessReview).
func (s *soak) metricsToken() string {
	t := s.t
	const name = "sunk-soak-metrics"
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: slurmNS}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: slurmNS}}
	rbac := s.cs.RbacV1()
	if _, err := rbac.ClusterRoles().Create(s.ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(s.ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := s.cs.CoreV1().ServiceAccounts(slurmNS).Create(s.ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = s.cs.CoreV1().ServiceAccounts(slurmNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	secs := int64(4 * 3600)
	tr, err := s.cs.CoreV1().ServiceAccounts(slurmNS).CreateToken(s.ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrape reads a sunk component's /metrics from its pod IP (this machine's pod network).
func (s *soak) scrape(c component) ([]Series, *corev1.Pod, error) {
	p, err := s.podOf(c)
	if err != nil {
		return nil, nil, err
	}
	url := fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, metricsPort)
	if c.metrics == "https" {
		url = fmt.Sprintf("https://%s:%d/metrics", p.Status.PodIP, schedPort)
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, p, err
	}
	if c.metrics == "https" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return nil, p, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, p, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, p, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	series, err := ParseMetrics(string(body))
	return series, p, err
}

// ---- sampling ----

func (s *soak) sampler(ctx context.Context) {
	tick := time.NewTicker(samplePeriod)
	defer tick.Stop()
	s.takeSample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.takeSample()
		}
	}
}

func (s *soak) takeSample() {
	s.mu.Lock()
	sm := sample{t: time.Now(), comps: map[string]*compSample{}, phase: s.phase}
	s.mu.Unlock()
	for _, c := range sunkComps {
		cs := &compSample{rss: math.NaN(), gor: math.NaN()}
		sm.comps[c.name] = cs
		series, _, err := s.scrape(c)
		if err != nil {
			cs.err = err.Error()
			continue
		}
		cs.ok = true
		delta := s.counters[c.name].Delta(series)
		cs.rest = map[string]float64{}
		for _, se := range series {
			if se.Name == "sunk_slurm_rest_requests_total" {
				cs.restSeries = true
				if d := delta[se.Key()]; d > 0 {
					cs.rest[se.Labels["endpoint"]+"|"+se.Labels["outcome"]] += d
				}
			}
		}
		cs.latency = HistogramDelta(series, delta, "sunk_syncer_sync_latency_seconds", "direction")
		if v, ok := Find(series, "process_resident_memory_bytes", nil); ok {
			cs.rss = v
		} else if pid, _, err := s.pid(c); err == nil {
			cs.rss, _ = RSSBytes("/proc", pid)
		}
		if v, ok := Find(series, "go_goroutines", nil); ok {
			cs.gor = v
		}
	}
	sm.conns, sm.connErr = s.restConns()
	if out, err := s.login("sinfo -h -N -o '%N|%T|%E'; echo ---; scontrol -o show job"); err != nil {
		sm.nodesErr = err.Error()
	} else {
		nodesOut, jobsOut, _ := strings.Cut(out, "---\n")
		sm.nodes = ParseNodes(nodesOut)
		s.trackJobs(ParseJobs(jobsOut), sm.t)
	}
	for _, n := range sm.nodes {
		if n.Drained() && strings.HasPrefix(n.Reason, "k8s:") {
			sm.k8sDrains = append(sm.k8sDrains, n)
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
	var conns []string
	for k, v := range sm.conns {
		conns = append(conns, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(conns)
	running := 0
	s.mu.Lock()
	for _, j := range s.jobs {
		if j.State == "RUNNING" {
			running++
		}
	}
	s.mu.Unlock()
	s.t.Logf("[%5.0fs] sample: phase=%s slurm_nodes=%d k8s_drains=%d running_jobs=%d conns{%s} %s",
		time.Since(s.start).Seconds(), sm.phase, len(sm.nodes), len(sm.k8sDrains), running, strings.Join(conns, " "),
		firstNonEmpty(sm.nodesErr, sm.connErr))
}

func firstNonEmpty(v ...string) string {
	for _, x := range v {
		if x != "" {
			return x
		}
	}
	return ""
}

// restConns counts the established connections at slurmrestd's port, by the peer's component:
// slurmrestd's own socket table (/proc/<pid>/net/tcp of its network namespace), each peer IP
// mapped to the pod that has it.
func (s *soak) restConns() (map[string]int, string) {
	pid, _, err := s.pid(slurmrestd)
	if err != nil {
		return nil, err.Error()
	}
	byIP, err := EstablishedTo("/proc", pid, restPort)
	if err != nil {
		return nil, err.Error()
	}
	names := map[string]string{"127.0.0.1": "local", "::1": "local"}
	pods, err := s.cs.CoreV1().Pods("").List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err.Error()
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.Spec.HostNetwork {
			continue
		}
		name := p.Labels["app.kubernetes.io/component"]
		if p.Labels["app.kubernetes.io/instance"] != sunkRelease || name == "" {
			name = p.Namespace + "/" + p.Name
		}
		names[p.Status.PodIP] = name
	}
	if n, err := s.cs.CoreV1().Nodes().Get(s.ctx, s.cl.NodeName, metav1.GetOptions{}); err == nil {
		for _, a := range n.Status.Addresses {
			names[a.Address] = "node"
		}
	}
	out := map[string]int{}
	for ip, n := range byIP {
		name, ok := names[ip]
		if !ok {
			name = ip
		}
		out[name] += n
	}
	return out, ""
}

// readablePoll reads the syncer's readable gauge every second (the 10 s samples would see only
// every tenth second of it).
func (s *soak) readablePoll(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			state := -1
			if series, _, err := s.scrape(syncerC); err == nil {
				for _, se := range series {
					if se.Name == "sunk_syncer_slurm_state_readable" && strings.Contains(se.Labels["cluster"], clusterName) {
						state = int(se.Value)
					}
				}
			}
			s.mu.Lock()
			s.ticks = append(s.ticks, readTick{t: now, dt: now.Sub(last), state: state})
			s.mu.Unlock()
			last = now
		}
	}
}

func (s *soak) trackJobs(jobs []Job, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		if prev, ok := s.jobs[j.ID]; ok && prev.Restarts > j.Restarts {
			j.Restarts = prev.Restarts
		}
		if _, ok := s.firstSeen[j.ID]; !ok {
			s.firstSeen[j.ID] = at
		}
		s.jobs[j.ID] = j
	}
}

// ---- the job stream ----

// jobStream submits a job every few seconds from the login pod, round robin: a batch job
// with steps, an array, an interactive srun.
func (s *soak) jobStream(ctx context.Context) {
	tick := time.NewTicker(4 * time.Second)
	defer tick.Stop()
	sruns := make(chan struct{}, 2) // at most two interactive sruns at a time
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch i % 3 {
		case 0:
			n, secs := 1+rand.IntN(3), 5+rand.IntN(20)
			s.submit(ctx, "batch", fmt.Sprintf("sbatch --parsable -J soak-batch -N%d -t 5 -o /dev/null --wrap 'srun hostname >/dev/null; sleep %d'", n, secs))
		case 1:
			s.submit(ctx, "array", fmt.Sprintf("sbatch --parsable -J soak-array --array=0-5%%3 -t 5 -o /dev/null --wrap 'sleep %d'", 3+rand.IntN(10)))
		case 2:
			select {
			case sruns <- struct{}{}:
			default:
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sruns }()
				s.submit(context.Background(), "srun", "srun -J soak-srun -N2 -t 2 sh -c 'echo $SLURM_JOB_ID; sleep 2'")
			}()
		}
	}
}

var leadingID = regexp.MustCompile(`^(\d+)`)

func (s *soak) submit(ctx context.Context, kind, script string) {
	out, err := s.loginCtx(ctx, 6*time.Minute, script)
	m := leadingID.FindStringSubmatch(strings.TrimSpace(out))
	s.mu.Lock()
	defer s.mu.Unlock()
	if m != nil {
		s.submitted[m[1]] = kind
	}
	if err != nil && ctx.Err() == nil {
		s.submitErrs = append(s.submitErrs, fmt.Sprintf("%s at %.0fs: %v", kind, time.Since(s.start).Seconds(), oneLine(err.Error())))
	}
}

func oneLine(v string) string {
	v = strings.Join(strings.Fields(v), " ")
	if len(v) > 200 {
		v = v[:200] + "…"
	}
	return v
}

// waitJobsEnded waits until every job of the soak has ended.
func (s *soak) waitJobsEnded(timeout time.Duration) {
	s.poll(timeout, 2*time.Second, "every soak job ended", func() error {
		out, err := s.login("scontrol -o show job")
		if err != nil {
			return err
		}
		s.trackJobs(ParseJobs(out), time.Now())
		s.mu.Lock()
		defer s.mu.Unlock()
		var live []string
		for id, j := range s.jobs {
			if !j.Terminal() {
				live = append(live, id+":"+j.State)
			}
		}
		if len(live) > 0 {
			sort.Strings(live)
			return fmt.Errorf("%d jobs not ended: %v", len(live), live)
		}
		return nil
	})
}

// ---- churn ----

// scale sets the NodeSet's replicas as a user does (helm upgrade of the demo release) and waits
// until Slurm has exactly the nodes compute-0..n-1, all registered and up, and as many compute
// pods are Ready. Scale-in drains and waits for jobs (the NodeSet controller); the job table says
// whether any job was killed.
func (s *soak) scale(n int, timeout time.Duration) {
	s.logf("scaling NodeSet compute to %d", n)
	// Helm's --set on a list element replaces the element: name and mode go with the count.
	s.helm("upgrade", clusterName, "charts/slurm", "-n", slurmNS, "--reuse-values",
		"--set", fmt.Sprintf("nodeSets[0].name=compute,nodeSets[0].mode=Replicas,nodeSets[0].replicas=%d", n))
	d := s.poll(timeout, 2*time.Second, fmt.Sprintf("%d Slurm nodes up", n), func() error {
		nodes, err := s.nodes()
		if err != nil {
			return err
		}
		up := 0
		for _, nd := range nodes {
			i, err := strconv.Atoi(strings.TrimPrefix(nd.Name, "compute-"))
			if err != nil || i >= n {
				continue
			}
			if !nd.NotResponding && !strings.HasPrefix(nd.State, "down") && !strings.HasPrefix(nd.State, "unk") && !strings.HasPrefix(nd.State, "fail") && nd.State != "future" {
				up++
			}
		}
		if up != n || len(nodes) != n {
			return fmt.Errorf("%d of %d Slurm nodes up, %d listed", up, n, len(nodes))
		}
		pods, err := s.pods(component{"compute", slurmNS, "sunk.dev/nodeset=compute", "", ""})
		if err != nil {
			return err
		}
		r := 0
		for i := range pods {
			if ready(&pods[i]) && pods[i].DeletionTimestamp.IsZero() {
				r++
			}
		}
		if r != n || len(pods) != n {
			return fmt.Errorf("%d of %d compute pods Ready, %d exist", r, n, len(pods))
		}
		return nil
	})
	s.logf("NodeSet at %d after %s", n, d.Round(time.Second))
}

func (s *soak) cordon(on bool) error {
	reason := any(nil)
	if on {
		reason = "soak: cordon loop"
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on},
		"metadata": map[string]any{"annotations": map[string]any{"sunk.dev/cordon-reason": reason}}})
	_, err := s.cs.CoreV1().Nodes().Patch(s.ctx, s.cl.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// cordonCycle cordons the one real node (it hosts every compute pod), waits for the syncer's
// `k8s: node cordoned` drains, uncordons and waits until they are lifted.
func (s *soak) cordonCycle() {
	w := window{what: "cordon", start: time.Now()}
	s.mu.Lock()
	s.cordons = append(s.cordons, w)
	idx := len(s.cordons) - 1
	s.mu.Unlock()
	if err := s.cordon(true); err != nil {
		s.t.Fatal(err)
	}
	cordoned := func() (int, int, error) {
		nodes, err := s.nodes()
		if err != nil {
			return 0, 0, err
		}
		k := 0
		for _, n := range nodes {
			if n.Drained() && strings.HasPrefix(n.Reason, "k8s:") && strings.Contains(n.Reason, "cordon") {
				k++
			}
		}
		return k, len(nodes), nil
	}
	first := s.poll(90*time.Second, time.Second, "a k8s: node cordoned drain", func() error {
		k, _, err := cordoned()
		if err == nil && k == 0 {
			err = fmt.Errorf("no node drained yet")
		}
		return err
	})
	var k, total int
	all := s.poll(90*time.Second, time.Second, "every node drained by the cordon", func() error {
		var err error
		k, total, err = cordoned()
		if err == nil && k < total {
			err = fmt.Errorf("%d of %d drained", k, total)
		}
		return err
	})
	if err := s.cordon(false); err != nil {
		s.t.Fatal(err)
	}
	lifted := s.poll(90*time.Second, time.Second, "cordon drains lifted", func() error {
		k, _, err := cordoned()
		if err == nil && k > 0 {
			err = fmt.Errorf("%d nodes still drained by the cordon", k)
		}
		return err
	})
	s.mu.Lock()
	s.cordons[idx].end = time.Now()
	s.mu.Unlock()
	s.logf("cordon: first drain %s, all %d drained %s, lifted %s after the uncordon",
		first.Round(100*time.Millisecond), total, all.Round(100*time.Millisecond), lifted.Round(100*time.Millisecond))
	s.maxFigure("cordon_first_drain_s", first.Seconds())
	s.maxFigure("cordon_all_drained_s", all.Seconds())
	s.maxFigure("uncordon_lifted_s", lifted.Seconds())
}

func (s *soak) maxFigure(name string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.figures[name]; !ok || v > old {
		s.figures[name] = v
	}
}

// personDrain is an admin's `scontrol update state=drain` and resume: it must reach the pod's
// annotation (Slurm → Kubernetes) and the syncer must leave a person's drain alone.
func (s *soak) personDrain() {
	podState := func() string {
		p, err := s.cs.CoreV1().Pods(slurmNS).Get(s.ctx, personNode, metav1.GetOptions{})
		if err != nil {
			return "error: " + err.Error()
		}
		return p.Annotations["slurm.sunk.dev/state"]
	}
	if out, err := s.login("scontrol update nodename=" + personNode + " state=drain reason='soak: a person drains it'"); err != nil {
		s.t.Fatalf("scontrol drain: %v %s", err, out)
	}
	d := s.poll(60*time.Second, 200*time.Millisecond, "person's drain on the pod", func() error {
		if st := podState(); !strings.Contains(st, "drain") {
			return fmt.Errorf("pod %s state %q", personNode, st)
		}
		return nil
	})
	// The syncer must not lift a person's drain: it is still there two samples later.
	held := time.Now()
	for time.Since(held) < 2*samplePeriod {
		nodes, err := s.nodes()
		if err == nil {
			for _, n := range nodes {
				if n.Name == personNode && !n.Drained() {
					s.t.Errorf("%s lost the person's drain: %+v", personNode, n)
				}
			}
		}
		time.Sleep(2 * time.Second)
	}
	if out, err := s.login("scontrol update nodename=" + personNode + " state=resume"); err != nil {
		s.t.Fatalf("scontrol resume: %v %s", err, out)
	}
	r := s.poll(60*time.Second, 200*time.Millisecond, "resume on the pod", func() error {
		if st := podState(); st == "" || strings.Contains(st, "drain") {
			return fmt.Errorf("pod %s state %q", personNode, st)
		}
		return nil
	})
	s.logf("person drain: on the pod after %s, resume after %s", d.Round(100*time.Millisecond), r.Round(100*time.Millisecond))
	s.maxFigure("person_drain_to_pod_s", d.Seconds())
	s.maxFigure("person_resume_to_pod_s", r.Seconds())
}

var schedRound int

// schedulerPods creates plain pods for sunk-scheduler, one after the other: each until it is
// bound and running with a Slurm job, then deleted, until its job ended (CANCELLED: the soak's
// own cancel). One at a time because the local cluster has one Kubernetes node and sunk-scheduler
// locks a node (taint sunk.dev/slurm-job) for the one job whose pod runs there: a second pod
// waits for the first one's lock.
func (s *soak) schedulerPods() {
	for i := 0; i < 2; i++ {
		schedRound++
		s.schedulerPod(fmt.Sprintf("soak-sched-%d", schedRound))
	}
}

func (s *soak) schedulerPod(name string) {
	core := s.cs.CoreV1().Pods(slurmNS)
	grace := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sunk.dev/soak": "true"}},
		Spec: corev1.PodSpec{
			SchedulerName: "sunk-scheduler", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: busybox, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
		},
	}
	if _, err := core.Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = core.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	var job string
	d := s.poll(3*time.Minute, time.Second, "sunk-scheduler pod "+name+" running", func() error {
		p, err := core.Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		job = p.Annotations["sunk.dev/slurm-job"]
		if p.Status.Phase != corev1.PodRunning || job == "" {
			return fmt.Errorf("pod %s: node %q phase %s job %q", name, p.Spec.NodeName, p.Status.Phase, job)
		}
		return nil
	})
	s.mu.Lock()
	s.cancelled[job] = "its sunk-scheduler pod was deleted"
	s.mu.Unlock()
	if err := core.Delete(s.ctx, name, metav1.DeleteOptions{}); err != nil {
		s.t.Fatal(err)
	}
	g := s.poll(2*time.Minute, time.Second, "sunk-scheduler pod "+name+" gone and its job ended", func() error {
		if _, err := core.Get(s.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s still there (%v)", name, err)
		}
		out, err := s.login("scontrol -o show job " + job)
		if err != nil {
			return err
		}
		jobs := ParseJobs(out)
		s.trackJobs(jobs, time.Now())
		if len(jobs) != 1 || !jobs[0].Terminal() {
			return fmt.Errorf("job %s: %v", job, jobs)
		}
		return nil
	})
	s.logf("sunk-scheduler pod %s: running with job %s after %s; deleted → job ended in %s", name, job,
		d.Round(100*time.Millisecond), g.Round(100*time.Millisecond))
	s.maxFigure("sched_pod_running_s", d.Seconds())
	s.maxFigure("sched_delete_to_job_end_s", g.Seconds())
}

// kill SIGKILLs the component's process (found through its container's cgroup on this host)
// and waits until a new process runs and its pod is Ready; the kill window lasts one sample
// period longer.
func (s *soak) kill(c component) {
	pid, pod, err := s.pid(c)
	if err != nil {
		s.t.Fatalf("kill %s: %v", c.name, err)
	}
	w := window{what: "kill " + c.name, start: time.Now()}
	s.mu.Lock()
	s.windows = append(s.windows, w)
	idx := len(s.windows) - 1
	s.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		s.t.Fatalf("kill -9 %d (%s): %v", pid, c.name, err)
	}
	s.logf("SIGKILL %s (pid %d, pod %s)", c.name, pid, pod.Name)
	d := s.poll(5*time.Minute, 500*time.Millisecond, c.name+" back and Ready", func() error {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !zombie(string(st)) {
			return fmt.Errorf("pid %d still alive", pid)
		}
		np, p, err := s.pid(c)
		if err != nil {
			return err
		}
		if np == pid {
			return fmt.Errorf("pid %d still there", pid)
		}
		if !ready(p) {
			return fmt.Errorf("pod %s not Ready", p.Name)
		}
		return nil
	})
	now := time.Now()
	s.mu.Lock()
	s.windows[idx].end = now.Add(samplePeriod)
	s.lastKillAt = now
	s.figures["recover_"+c.name+"_s"] = d.Seconds()
	s.mu.Unlock()
	s.logf("%s back and Ready %s after SIGKILL", c.name, d.Round(100*time.Millisecond))
}

// ---- the report ----

func (s *soak) inKill(t time.Time) bool {
	for _, w := range s.windows {
		if w.covers(t) {
			return true
		}
	}
	return false
}

func (s *soak) intervalInKill(a, b time.Time) bool {
	for _, w := range s.windows {
		if w.overlaps(a, b) {
			return true
		}
	}
	return false
}

func (s *soak) inCordon(t time.Time) bool {
	for _, w := range s.cordons {
		if w.covers(t) {
			return true
		}
	}
	return false
}

func (s *soak) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &Report{}
	judgeGrowth := s.dur >= 20*time.Minute
	r.Bench = append(r.Bench, []KV{{"soak", "run"}, {"duration", s.dur.String()}, {"total_s", Num(math.Round(s.figures["total_s"]))},
		{"samples", Num(float64(len(s.samples)))}, {"compute_pods_max", Num(bigScale)},
		{"scale_up_s", Num(math.Round(s.figures["scale_up_s"]))}, {"scale_in_s", Num(math.Round(s.figures["scale_in_s"]))}})

	// Connections to slurmrestd.
	maxConn := map[string]int{}
	for _, sm := range s.samples {
		for k, v := range sm.conns {
			if v > maxConn[k] {
				maxConn[k] = v
			}
		}
	}
	connKV := []KV{{"soak", "conns_to_slurmrestd_max"}}
	ct := Table{Title: "Established connections to slurmrestd (:6820), max over samples", Header: []string{"peer", "max"}}
	var peers []string
	for k := range maxConn {
		peers = append(peers, k)
	}
	sort.Strings(peers)
	worst := 0
	for _, k := range peers {
		connKV = append(connKV, KV{strings.ReplaceAll(k, "/", "_"), Num(float64(maxConn[k]))})
		ct.Rows = append(ct.Rows, []string{k, Num(float64(maxConn[k]))})
	}
	for _, c := range sunkComps {
		if maxConn[c.name] > worst {
			worst = maxConn[c.name]
		}
		if _, ok := maxConn[c.name]; !ok {
			ct.Rows = append(ct.Rows, []string{c.name, "0"})
		}
	}
	r.Bench = append(r.Bench, connKV)
	r.Tables = append(r.Tables, ct)
	r.Checks = append(r.Checks, Check{Bound: "connections per sunk component ≤ 8 at all times", Value: fmt.Sprintf("max %d", worst), OK: worst <= maxConns, Judged: true})

	// The syncer's readability outside kill windows.
	var unread, notRep, unreadAll float64
	for _, tk := range s.ticks {
		switch {
		case tk.state == 0 && !s.inKill(tk.t):
			unread += tk.dt.Seconds()
		case tk.state == -1 && !s.inKill(tk.t):
			notRep += tk.dt.Seconds()
		}
		if tk.state == 0 {
			unreadAll += tk.dt.Seconds()
		}
	}
	r.Bench = append(r.Bench, []KV{{"soak", "syncer"}, {"unreadable_s_outside_kills", Num(math.Round(unread))},
		{"unreadable_s_total", Num(math.Round(unreadAll))}, {"not_reporting_s_outside_kills", Num(math.Round(notRep))}})
	r.Checks = append(r.Checks, Check{Bound: "syncer unreadable seconds outside kill windows = 0", Value: Num(math.Round(unread)), OK: unread == 0, Judged: true})

	// REST requests and errors outside kill windows.
	restOut := map[string]map[string]float64{}
	restAll := map[string]map[string]float64{}
	errByEndpoint := map[string]float64{}
	latOut, latAll := map[string]Histogram{}, map[string]Histogram{}
	scrapeErrs := map[string]int{}
	for i, sm := range s.samples {
		prev := s.start
		if i > 0 {
			prev = s.samples[i-1].t
		}
		inKill := s.intervalInKill(prev, sm.t)
		for name, cs := range sm.comps {
			if !cs.ok {
				if !inKill {
					scrapeErrs[name]++
				}
				continue
			}
			if restAll[name] == nil {
				restAll[name], restOut[name] = map[string]float64{}, map[string]float64{}
			}
			for k, v := range cs.rest {
				ep, oc, _ := strings.Cut(k, "|")
				restAll[name][oc] += v
				if !inKill {
					restOut[name][oc] += v
					if restError(oc) {
						errByEndpoint[name+" "+ep+" "+oc] += v
					}
				}
			}
			for dir, h := range cs.latency {
				if latAll[dir] == nil {
					latAll[dir], latOut[dir] = Histogram{}, Histogram{}
				}
				latAll[dir].Add(h)
				if !inKill {
					latOut[dir].Add(h)
				}
			}
		}
	}
	rt := Table{Title: "slurmrestd requests by sunk component (outside kill windows; whole run in brackets)", Header: []string{"component", "requests", "errors", "error ratio", "by outcome"}}
	totalErr := 0.0
	for _, c := range sunkComps {
		out, all := restOut[c.name], restAll[c.name]
		exposes := false
		for _, sm := range s.samples {
			if cs := sm.comps[c.name]; cs != nil && cs.restSeries {
				exposes = true
			}
		}
		if !exposes {
			rt.Rows = append(rt.Rows, []string{c.name, "not exported", "", "", "no sunk_slurm_rest_requests_total on its /metrics"})
			r.Notes = append(r.Notes, c.name+" exports no sunk_slurm_rest_requests_total: its REST errors are not counted")
			continue
		}
		var n, e, nAll, eAll float64
		var parts []string
		var ocs []string
		for oc := range all {
			ocs = append(ocs, oc)
		}
		sort.Strings(ocs)
		for _, oc := range ocs {
			parts = append(parts, fmt.Sprintf("%s %s [%s]", oc, Num(out[oc]), Num(all[oc])))
			n += out[oc]
			nAll += all[oc]
			if restError(oc) {
				e += out[oc]
				eAll += all[oc]
			}
		}
		ratio := math.NaN()
		if n > 0 {
			ratio = e / n
		}
		totalErr += e
		rt.Rows = append(rt.Rows, []string{c.name, fmt.Sprintf("%s [%s]", Num(n), Num(nAll)), fmt.Sprintf("%s [%s]", Num(e), Num(eAll)), Num(ratio), strings.Join(parts, ", ")})
		r.Bench = append(r.Bench, []KV{{"soak", "rest_" + c.name}, {"requests_outside_kills", Num(n)}, {"errors_outside_kills", Num(e)},
			{"error_ratio_outside_kills", Num(ratio)}, {"requests_total", Num(nAll)}, {"errors_total", Num(eAll)}})
	}
	r.Tables = append(r.Tables, rt)
	var errDetail []string
	for k, v := range errByEndpoint {
		errDetail = append(errDetail, fmt.Sprintf("%s ×%s", k, Num(v)))
	}
	sort.Strings(errDetail)
	r.Checks = append(r.Checks, Check{Bound: "REST errors outside kill windows = 0", Value: Num(totalErr) + " " + strings.Join(errDetail, "; "), OK: totalErr == 0, Judged: true})

	// Sync latency.
	lt := Table{Title: "Sync latency (sunk_syncer_sync_latency_seconds), outside kill windows", Header: []string{"direction", "observations", "p50 s", "p99 s", "p99 bucket ≤", "whole run p99 s"}}
	for _, dir := range []string{"k8s_to_slurm", "slurm_to_k8s"} {
		h := latOut[dir]
		if h == nil {
			h = Histogram{}
		}
		p50, _ := h.Quantile(0.5)
		p99, up := h.Quantile(0.99)
		all := latAll[dir]
		if all == nil {
			all = Histogram{}
		}
		p99all, _ := all.Quantile(0.99)
		lt.Rows = append(lt.Rows, []string{dir, Num(h.Count()), Num(p50), Num(p99), Num(up), Num(p99all)})
		r.Bench = append(r.Bench, []KV{{"soak", "sync_" + dir}, {"n", Num(h.Count())}, {"p50_s", Num(p50)}, {"p99_s", Num(p99)}, {"p99_bucket_s", Num(up)}, {"p99_s_whole_run", Num(p99all)}})
		ok := h.Count() > 0 && p99 < 2
		r.Checks = append(r.Checks, Check{Bound: "sync p99 < 2 s, " + dir, Value: fmt.Sprintf("%s s (n=%s)", Num(p99), Num(h.Count())), OK: ok, Judged: true})
	}
	r.Tables = append(r.Tables, lt)

	// RSS and goroutines at start (after the scale-up), middle (after the kills, at or past
	// half time) and end (before the scale-in).
	startI, midI, endI := -1, -1, -1
	mid := s.start.Add(s.dur / 2)
	if s.lastKillAt.Add(2 * samplePeriod).After(mid) {
		mid = s.lastKillAt.Add(2 * samplePeriod)
	}
	for i, sm := range s.samples {
		if startI < 0 && !sm.t.Before(s.scaleUpAt) {
			startI = i
		}
		if midI < 0 && !sm.t.Before(mid) {
			midI = i
		}
		if !s.scaleInAt.IsZero() && sm.t.Before(s.scaleInAt) {
			endI = i
		}
	}
	gt := Table{Title: "RSS (MiB) and goroutines: start (after scale-up) / middle / end (before scale-in)", Header: []string{"component", "RSS start", "RSS mid", "RSS end", "goroutines start", "mid", "end", "growth mid→end"}}
	at := func(i int, c string) *compSample {
		if i < 0 || i >= len(s.samples) || s.samples[i].comps[c] == nil {
			return &compSample{rss: math.NaN(), gor: math.NaN()}
		}
		return s.samples[i].comps[c]
	}
	if midI >= 0 && endI >= 0 && midI >= endI {
		r.Notes = append(r.Notes, "the middle sample is not before the end sample (short run): growth is not meaningful")
	}
	for _, c := range sunkComps {
		a, m, e := at(startI, c.name), at(midI, c.name), at(endI, c.name)
		gr := (e.rss - m.rss) / m.rss
		gg := (e.gor - m.gor) / m.gor
		gt.Rows = append(gt.Rows, []string{c.name, MiB(a.rss), MiB(m.rss), MiB(e.rss), Num(a.gor), Num(m.gor), Num(e.gor),
			fmt.Sprintf("RSS %s %%, goroutines %s %%", Num(100*gr), Num(100*gg))})
		r.Bench = append(r.Bench, []KV{{"soak", "resources_" + c.name}, {"rss_mib_start", MiB(a.rss)}, {"rss_mib_mid", MiB(m.rss)}, {"rss_mib_end", MiB(e.rss)},
			{"goroutines_start", Num(a.gor)}, {"goroutines_mid", Num(m.gor)}, {"goroutines_end", Num(e.gor)}})
		ok := !(gr > 0.10) && !(gg > 0.10) && !math.IsNaN(gr) && !math.IsNaN(gg)
		r.Checks = append(r.Checks, Check{Bound: "RSS and goroutines grow < 10 % over the second half, " + c.name,
			Value: fmt.Sprintf("RSS %s %%, goroutines %s %%", Num(100*gr), Num(100*gg)), OK: ok, Judged: judgeGrowth})
	}
	r.Tables = append(r.Tables, gt)
	if !judgeGrowth {
		r.Notes = append(r.Notes, fmt.Sprintf("growth over the second half is judged only for runs of 20 minutes or more; this one was %s", s.dur))
	}

	// Jobs.
	counts := map[string]map[string]int{}
	var bad, badInKill []string
	unseen, unfinished := 0, 0
	for id, kind := range s.submitted {
		if _, ok := s.jobs[id]; !ok && s.figures["total_s"] > 0 {
			unseen++
			bad = append(bad, fmt.Sprintf("%s (%s): never seen in slurmctld's job table", id, kind))
		}
	}
	ids := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		j := s.jobs[id]
		if j.Terminal() && !j.End.IsZero() && j.End.Before(s.start) {
			continue // ended before the soak (the demo's first job, an earlier run's)
		}
		kind := j.Name
		if _, ok := s.cancelled[id]; ok {
			kind = "sunk-scheduler pod"
		}
		if counts[kind] == nil {
			counts[kind] = map[string]int{}
		}
		st := j.State
		if j.Restarts > 0 {
			st += fmt.Sprintf("(requeued %d)", j.Restarts)
		}
		counts[kind][st]++
		why, cancelledBySoak := s.cancelled[id]
		okEnd := j.State == "COMPLETED" && j.Restarts == 0 || cancelledBySoak && j.State == "CANCELLED"
		if okEnd {
			continue
		}
		if !j.Terminal() {
			unfinished++ // only when the run stopped early: the normal end waits for every job
			continue
		}
		desc := fmt.Sprintf("%s %s %s exit %s on %s, ended %s", id, j.Name, st, j.ExitCode, j.NodeList, j.End.Format(time.TimeOnly))
		if cancelledBySoak {
			desc += " (" + why + ")"
		}
		if !j.End.IsZero() && s.inKill(j.End) {
			badInKill = append(badInKill, desc+" [in a kill window]")
		} else {
			bad = append(bad, desc)
		}
	}
	jt := Table{Title: "Jobs by end state (from slurmctld's table, sampled every 10 s; the demo runs without accounting, so no sacct)", Header: []string{"job", "end states"}}
	var kinds []string
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	jobKV := []KV{{"soak", "jobs"}, {"submitted", Num(float64(len(s.submitted)))}, {"seen", Num(float64(len(s.jobs)))}}
	for _, k := range kinds {
		var parts []string
		var sts []string
		for st := range counts[k] {
			sts = append(sts, st)
		}
		sort.Strings(sts)
		for _, st := range sts {
			parts = append(parts, fmt.Sprintf("%s %d", st, counts[k][st]))
			jobKV = append(jobKV, KV{strings.ReplaceAll(k+"_"+st, " ", "_"), Num(float64(counts[k][st]))})
		}
		jt.Rows = append(jt.Rows, []string{k, strings.Join(parts, ", ")})
	}
	if unfinished > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d jobs had not ended when the run stopped early", unfinished))
	}
	jobKV = append(jobKV, KV{"unfinished", Num(float64(unfinished))}, KV{"bad_outside_kills", Num(float64(len(bad)))}, KV{"bad_in_kills", Num(float64(len(badInKill)))},
		KV{"submit_errors", Num(float64(len(s.submitErrs)))})
	r.Bench = append(r.Bench, jobKV)
	r.Tables = append(r.Tables, jt)
	r.Checks = append(r.Checks, Check{Bound: "no job killed, cancelled, requeued or failed but the soak's own cancels (outside kill windows)",
		Value: fmt.Sprintf("%d bad: %s", len(bad), strings.Join(bad, "; ")), OK: len(bad) == 0, Judged: true})
	if len(badInKill) > 0 {
		r.Notes = append(r.Notes, "jobs that ended badly inside a kill window (reported, not judged): "+strings.Join(badInKill, "; "))
	}
	if len(s.submitErrs) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d submissions failed at the login pod: %s", len(s.submitErrs), strings.Join(s.submitErrs, "; ")))
	}

	// Drains: k8s: drains left at the end, and transient ones outside cordons.
	var left []string
	if n := len(s.samples); n > 0 {
		for _, nd := range s.samples[n-1].nodes {
			if nd.Drained() {
				left = append(left, nd.Name+" "+nd.State+" "+nd.Reason)
			}
		}
	}
	r.Checks = append(r.Checks, Check{Bound: "no `k8s:` (or any) drain left at the end", Value: fmt.Sprintf("%d: %s", len(left), strings.Join(left, "; ")), OK: len(left) == 0, Judged: true})
	transient := map[string]int{}
	for _, sm := range s.samples {
		if s.inCordon(sm.t) {
			continue
		}
		for _, nd := range sm.k8sDrains {
			if strings.HasPrefix(nd.Reason, "k8s: nodeset") {
				continue // the NodeSet controller's own scale-in drain
			}
			transient[nd.Reason]++
		}
	}
	var tr []string
	for k, v := range transient {
		tr = append(tr, fmt.Sprintf("%q ×%d", k, v))
	}
	sort.Strings(tr)
	r.Bench = append(r.Bench, []KV{{"soak", "drains"}, {"k8s_drain_node_samples_outside_cordons", Num(float64(sumInts(transient)))}, {"left_at_end", Num(float64(len(left)))}})
	if len(tr) > 0 {
		r.Notes = append(r.Notes, "k8s: drains seen outside the soak's cordons (node×sample): "+strings.Join(tr, ", "))
	}

	// Churn figures.
	var fk []string
	for k := range s.figures {
		fk = append(fk, k)
	}
	sort.Strings(fk)
	chKV := []KV{{"soak", "churn"}}
	for _, k := range fk {
		if k == "total_s" || k == "scale_up_s" || k == "scale_in_s" {
			continue
		}
		chKV = append(chKV, KV{k, Num(math.Round(s.figures[k]*10) / 10)})
	}
	chKV = append(chKV, KV{"cordon_cycles", Num(float64(len(s.cordons)))}, KV{"kills", Num(float64(len(s.windows)))})
	r.Bench = append(r.Bench, chKV)
	for name, n := range scrapeErrs {
		r.Notes = append(r.Notes, fmt.Sprintf("%s's /metrics failed in %d samples outside kill windows", name, n))
	}
	var ws []string
	for _, w := range s.windows {
		ws = append(ws, fmt.Sprintf("%s %.0f–%.0fs", w.what, w.start.Sub(s.start).Seconds(), w.end.Sub(s.start).Seconds()))
	}
	r.Notes = append(r.Notes, "kill windows (kill → Ready + one sample): "+strings.Join(ws, ", "))
	r.Warnings = s.logWarnings()

	f, err := os.Create(filepath.Join(s.dir, "report.md"))
	if err == nil {
		fmt.Fprintf(f, "# sunk soak, DURATION=%s, %s\n\n", s.dur, s.start.Format(time.RFC3339))
		r.Write(f)
		fmt.Fprintf(f, "\n## Timeline\n\n```\n%s\n```\n", strings.Join(s.timeline, "\n"))
		f.Close()
	}
	fmt.Println()
	r.Write(os.Stdout)
	fmt.Printf("\nreport and component logs: %s\n", s.dir)
	for _, c := range r.Failed() {
		s.t.Errorf("bound broken: %s: %s", c.Bound, c.Value)
	}
}

func sumInts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// restError says whether an outcome of sunk_slurm_rest_requests_total is an error: anything
// but an answer (ok, not modified), Slurm's definite "no such thing", or "retried" (pkg/slurm:
// Slurm 24.11's HTTP 500 to an incremental node list, which means "changed, ask again"; the
// report still lists how many there were).
func restError(outcome string) bool {
	switch outcome {
	case "ok", "not_modified", "not_found", "retried":
		return false
	}
	return true
}

var warnLine = regexp.MustCompile(`(?i)(^[EW]\d{4} |"level":"(error|warn)|\b(error|warning|failed|unable|refused|timed? ?out|deferring)\b)`)

// logWarnings saves each component's log since the soak started (the killed container's too)
// and lists its warnings and errors that repeat, as an operator reading them would.
func (s *soak) logWarnings() []string {
	var out []string
	since := metav1.NewTime(s.start)
	for _, c := range append(append([]component{}, sunkComps...), slurmrestd, slurmctld) {
		pods, err := s.pods(c)
		if err != nil {
			continue
		}
		var lines []string
		for _, p := range pods {
			for _, ctr := range p.Spec.Containers {
				for _, prev := range []bool{true, false} {
					b, err := s.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, Previous: prev, SinceTime: &since}).DoRaw(s.ctx)
					if err != nil {
						continue
					}
					name := fmt.Sprintf("%s-%s-%s", c.name, p.Name, ctr.Name)
					if prev {
						name += "-previous"
					}
					_ = os.WriteFile(filepath.Join(s.dir, name+".log"), b, 0o644)
					for _, l := range strings.Split(string(b), "\n") {
						if warnLine.MatchString(l) {
							lines = append(lines, l)
						}
					}
				}
			}
		}
		rep := Repeated(lines, 3)
		for i, r := range rep {
			if i == 8 {
				out = append(out, fmt.Sprintf("%s: … %d more repeated shapes", c.name, len(rep)-8))
				break
			}
			out = append(out, fmt.Sprintf("%s ×%d: `%s`", c.name, r.N, strings.ReplaceAll(r.Shape, "`", "'")))
		}
	}
	return out
}
