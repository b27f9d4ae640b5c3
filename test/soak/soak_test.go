//go:build soak

package soak

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// clientTimeout is the longest request timeout of sunk's REST clients (the operator's).
	clientTimeout = 15 * time.Second
	bigScale      = 40
	smallScale    = 3
	maxConns      = 8
	personNode    = "compute-1" // exists at both scales
	// burstNodeSet is hack/demo.sh's autoscaled NodeSet (BURST there), stated again by every
	// helm upgrade of the soak.
	burstNodeSet = "nodeSets[1].name=burst,nodeSets[1].mode=Replicas,nodeSets[1].autoscaling.maxReplicas=2,nodeSets[1].autoscaling.idleAfter=30s"
	// computeSpread is hack/demo.sh's SPREAD: compute's members tolerate the test bed's extra
	// machines, stated again by every helm upgrade of the soak.
	computeSpread = "nodeSets[0].tolerations[0].key=testbed.sunk.dev/extra-node,nodeSets[0].tolerations[0].operator=Exists,nodeSets[0].tolerations[0].effect=NoSchedule"
	busybox       = "docker.io/library/busybox:local"
	metricsPort   = 8080  // charts/sunk metrics.port
	schedPort     = 10259 // kube-scheduler's secure port
	restPort      = 6820
)

// component is a process the soak samples and kills once.
type component struct {
	name, ns, selector, comm string
	metrics                  string // "http", "https" or "" (no Prometheus endpoint)
	// lease names the component's leader-election Lease (in ns) when it runs standby replicas:
	// the soak samples and kills the leader, the replica doing the work.
	lease string
}

var (
	operator   = component{"operator", sunkNS, "app.kubernetes.io/instance=sunk,app.kubernetes.io/component=operator", "sunk-operator", "https", "sunk-operator.sunk.dev"}
	syncerC    = component{"syncer", sunkNS, "app.kubernetes.io/instance=sunk,app.kubernetes.io/component=syncer", "sunk-syncer", "https", "sunk-syncer.sunk.dev"}
	scheduler  = component{"scheduler", sunkNS, "app.kubernetes.io/instance=sunk,app.kubernetes.io/component=scheduler", "sunk-scheduler", "https", ""}
	slurmrestd = component{"slurmrestd", slurmNS, "sunk.dev/cluster=demo,sunk.dev/component=restapi", "slurmrestd", "", ""}
	// computeC is the demo's NodeSet compute: its pods, for scaling and the cordon loop.
	computeC  = component{name: "compute", ns: slurmNS, selector: "sunk.dev/nodeset=compute"}
	slurmctld = component{"slurmctld", slurmNS, "sunk.dev/cluster=demo,sunk.dev/component=controller", "slurmctld", "", ""}
	sunkComps = []component{operator, syncerC, scheduler}
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

	mu    sync.Mutex
	phase string
	// cordoned are the machines the cordon loop cordoned (those hosting compute pods), to be
	// uncordoned whatever happens.
	cordoned  []string
	windows   []window // kills
	cordons   []window
	samples   []sample
	ticks     []readTick
	counters  map[string]*Counters
	jobs      map[string]Job
	firstSeen map[string]time.Time
	// preexisting are the jobs slurmctld listed before the run: not tracked.
	preexisting map[string]bool
	submitted   map[string]string // job id → kind, from sbatch/srun
	cancelled   map[string]string // job id → why the soak cancelled it
	submitErrs  []string
	resumed     []string // nodes Slurm drained for a duplicate job id, resumed by the soak (resumeDuplicateJobidDrains)
	timeline    []string
	figures     map[string]float64
	scaleUpAt   time.Time // scale-up finished
	scaleInAt   time.Time // scale-in started
	lastKillAt  time.Time
	// restartBase are the watched containers' restart counts last seen (restarts_test.go);
	// restarts, the restarts seen since the run began.
	restartBase map[watched]int32
	restarts    []restart
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

	// Jobs already in slurmctld's table (an earlier run's, a person's) are not this run's to
	// judge: one left held by an interrupted run would otherwise keep the end waiting.
	before, err := s.login("scontrol -o show job")
	if err != nil {
		t.Fatalf("scontrol show job: %v", err)
	}
	s.preexisting = map[string]bool{}
	for _, j := range ParseJobs(before) {
		s.preexisting[j.ID] = true
	}

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
			nodes, err := s.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, n := range nodes.Items {
				for _, tt := range n.Spec.Taints {
					if tt.Key == "sunk.dev/slurm-job" {
						return fmt.Errorf("node lock %s=%s still on %s", tt.Key, tt.Value, n.Name)
					}
				}
			}
			return nil
		})
	})
	s.token = s.metricsToken()
	// Whatever happens, the machines end uncordoned.
	t.Cleanup(func() {
		if err := s.cordon(false); err != nil {
			t.Errorf("uncordoning: %v", err)
		}
	})
	return s
}

// run is the soak: the director's script of churn and faults, with the sampler, the syncer's
// readability poll and the job stream around it.
func (s *soak) run() {
	s.start = time.Now()
	s.restartBase = s.restartCounts()
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
	s.burstFigures()
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
