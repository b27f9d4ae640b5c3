package exporter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const c1 = "slurm/c1"

// known is a cluster of four nodes in two partitions (one of them in both), one running job,
// two pending ones and a completed one.
func known(t *testing.T) *slurmfake.Fake {
	t.Helper()
	f := slurmfake.New()
	f.AddPartition(slurm.Partition{Name: "gpu", State: []string{"UP"}, TotalCPUs: 16})
	f.AddPartition(slurm.Partition{Name: "all", State: []string{"UP"}, TotalCPUs: 40})
	f.AddNode(slurm.Node{Name: "cpu-0", State: []string{"MIXED"}, Partitions: []string{"all"}, CPUs: 8, AllocCPUs: 2,
		RealMemoryMB: 1024, AllocMemoryMB: 256})
	f.AddNode(slurm.Node{Name: "cpu-1", State: []string{"IDLE", "DRAIN"}, Reason: "bad DIMM", Partitions: []string{"all"},
		CPUs: 8, RealMemoryMB: 1024})
	f.AddNode(slurm.Node{Name: "cpu-2", State: []string{"DOWN", "NOT_RESPONDING"}, Partitions: []string{"all"}, CPUs: 8, RealMemoryMB: 1024})
	f.AddNode(slurm.Node{Name: "gpu-0", State: []string{"ALLOCATED"}, Partitions: []string{"all", "gpu"}, CPUs: 16, AllocCPUs: 16,
		RealMemoryMB: 4096, AllocMemoryMB: 1024, Gres: "gpu:a100:4(S:0-1)", GresUsed: "gpu:a100:3(IDX:0-2)"})
	f.AddJob(slurm.Job{ID: 1, State: []string{"RUNNING"}, Partition: "gpu", UserName: "ada", Account: "ml", CPUs: 16, Nodes: "gpu-0"})
	f.AddJob(slurm.Job{ID: 2, State: []string{"PENDING"}, StateReason: "Resources", Partition: "gpu", UserName: "ada", Account: "ml", CPUs: 4})
	f.AddJob(slurm.Job{ID: 3, State: []string{"PENDING"}, StateReason: "Priority", Partition: "all", UserName: "bob", Account: "phys", CPUs: 1})
	f.AddJob(slurm.Job{ID: 4, State: []string{"COMPLETED"}, Partition: "all", UserName: "bob", Account: "phys", CPUs: 2})
	f.SetDiag(slurm.Diag{ServerThreadCount: 3, JobsSubmitted: 40, JobsStarted: 30, ScheduleCycleLast: 1500 * time.Microsecond,
		ScheduleCycles: 120, BackfillActive: true, BackfillJobs: 9, BackfillCycleMean: 5 * time.Millisecond,
		ResetTime: time.Unix(1699920000, 0), BackfillLastCycle: time.Unix(1700000050, 0)})
	return f
}

func newExporter(t *testing.T, f *slurmfake.Fake, opts Options, mod ...func(*Target)) (*Exporter, *clock) {
	t.Helper()
	clk := &clock{t: time.Unix(1700000000, 0)}
	opts.Now = clk.now
	tg := Target{Name: c1, Slurm: f, Pods: func(context.Context) (map[string]PodInfo, error) {
		return map[string]PodInfo{"gpu-0": {NodeSet: "gpus", KubeNode: "kube-7"}}, nil
	}}
	for _, m := range mod {
		m(&tg)
	}
	return New(func() []Target { return []Target{tg} }, opts), clk
}

func compare(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestSnapshotValues(t *testing.T) {
	e, _ := newExporter(t, known(t), Options{UserSeries: true})
	e.Refresh(context.Background())
	if problems, err := testutil.CollectAndLint(e); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	compare(t, e, `
# HELP slurm_up 1 when the last refresh read every part of Slurm's state (nodes, jobs, partitions, diag); 0 otherwise.
# TYPE slurm_up gauge
slurm_up{cluster="slurm/c1"} 1
# HELP slurm_nodes Slurm nodes by state (each node once).
# TYPE slurm_nodes gauge
slurm_nodes{cluster="slurm/c1",state="allocated"} 1
slurm_nodes{cluster="slurm/c1",state="down"} 1
slurm_nodes{cluster="slurm/c1",state="drained"} 1
slurm_nodes{cluster="slurm/c1",state="mixed"} 1
# HELP slurm_partition_nodes Slurm nodes of a partition by state.
# TYPE slurm_partition_nodes gauge
slurm_partition_nodes{cluster="slurm/c1",partition="all",state="allocated"} 1
slurm_partition_nodes{cluster="slurm/c1",partition="all",state="down"} 1
slurm_partition_nodes{cluster="slurm/c1",partition="all",state="drained"} 1
slurm_partition_nodes{cluster="slurm/c1",partition="all",state="mixed"} 1
slurm_partition_nodes{cluster="slurm/c1",partition="gpu",state="allocated"} 1
`, "slurm_up", "slurm_nodes", "slurm_partition_nodes")

	compare(t, e, `
# HELP slurm_node_info One series per Slurm node (value 1) with its state, Slurm's state flags, partitions, drain reason, and its compute pod's NodeSet and Kubernetes node.
# TYPE slurm_node_info gauge
slurm_node_info{cluster="slurm/c1",flags="ALLOCATED",k8s_node="kube-7",node="gpu-0",nodeset="gpus",partitions="all,gpu",reason="",state="allocated"} 1
slurm_node_info{cluster="slurm/c1",flags="DOWN,NOT_RESPONDING",k8s_node="",node="cpu-2",nodeset="",partitions="all",reason="",state="down"} 1
slurm_node_info{cluster="slurm/c1",flags="IDLE,DRAIN",k8s_node="",node="cpu-1",nodeset="",partitions="all",reason="bad DIMM",state="drained"} 1
slurm_node_info{cluster="slurm/c1",flags="MIXED",k8s_node="",node="cpu-0",nodeset="",partitions="all",reason="",state="mixed"} 1
# HELP slurm_node_cpus_idle CPUs of a node that can take jobs and are not allocated (0 on a node that takes no jobs: down, drained, ...).
# TYPE slurm_node_cpus_idle gauge
slurm_node_cpus_idle{cluster="slurm/c1",node="cpu-0"} 6
slurm_node_cpus_idle{cluster="slurm/c1",node="cpu-1"} 0
slurm_node_cpus_idle{cluster="slurm/c1",node="cpu-2"} 0
slurm_node_cpus_idle{cluster="slurm/c1",node="gpu-0"} 0
# HELP slurm_node_memory_allocated_bytes Memory of a node allocated to jobs.
# TYPE slurm_node_memory_allocated_bytes gauge
slurm_node_memory_allocated_bytes{cluster="slurm/c1",node="cpu-0"} 2.68435456e+08
slurm_node_memory_allocated_bytes{cluster="slurm/c1",node="cpu-1"} 0
slurm_node_memory_allocated_bytes{cluster="slurm/c1",node="cpu-2"} 0
slurm_node_memory_allocated_bytes{cluster="slurm/c1",node="gpu-0"} 1.073741824e+09
# HELP slurm_node_gpus_idle GPUs of a node that can take jobs and are not allocated.
# TYPE slurm_node_gpus_idle gauge
slurm_node_gpus_idle{cluster="slurm/c1",node="cpu-0"} 0
slurm_node_gpus_idle{cluster="slurm/c1",node="cpu-1"} 0
slurm_node_gpus_idle{cluster="slurm/c1",node="cpu-2"} 0
slurm_node_gpus_idle{cluster="slurm/c1",node="gpu-0"} 1
`, "slurm_node_info", "slurm_node_cpus_idle", "slurm_node_memory_allocated_bytes", "slurm_node_gpus_idle")

	compare(t, e, `
# HELP slurm_partition_cpus CPUs of a partition's nodes.
# TYPE slurm_partition_cpus gauge
slurm_partition_cpus{cluster="slurm/c1",partition="all"} 40
slurm_partition_cpus{cluster="slurm/c1",partition="gpu"} 16
# HELP slurm_partition_cpus_allocated Allocated CPUs of a partition's nodes.
# TYPE slurm_partition_cpus_allocated gauge
slurm_partition_cpus_allocated{cluster="slurm/c1",partition="all"} 18
slurm_partition_cpus_allocated{cluster="slurm/c1",partition="gpu"} 16
# HELP slurm_partition_cpus_idle Idle CPUs of a partition's nodes that can take jobs.
# TYPE slurm_partition_cpus_idle gauge
slurm_partition_cpus_idle{cluster="slurm/c1",partition="all"} 6
slurm_partition_cpus_idle{cluster="slurm/c1",partition="gpu"} 0
# HELP slurm_partition_memory_bytes Memory of a partition's nodes.
# TYPE slurm_partition_memory_bytes gauge
slurm_partition_memory_bytes{cluster="slurm/c1",partition="all"} 7.516192768e+09
slurm_partition_memory_bytes{cluster="slurm/c1",partition="gpu"} 4.294967296e+09
# HELP slurm_partition_gpus GPUs of a partition's nodes.
# TYPE slurm_partition_gpus gauge
slurm_partition_gpus{cluster="slurm/c1",partition="all"} 4
slurm_partition_gpus{cluster="slurm/c1",partition="gpu"} 4
# HELP slurm_partition_gpus_allocated Allocated GPUs of a partition's nodes.
# TYPE slurm_partition_gpus_allocated gauge
slurm_partition_gpus_allocated{cluster="slurm/c1",partition="all"} 3
slurm_partition_gpus_allocated{cluster="slurm/c1",partition="gpu"} 3
# HELP slurm_partition_info One series per partition (value 1) with its state.
# TYPE slurm_partition_info gauge
slurm_partition_info{cluster="slurm/c1",partition="all",state="up"} 1
slurm_partition_info{cluster="slurm/c1",partition="gpu",state="up"} 1
`, "slurm_partition_cpus", "slurm_partition_cpus_allocated", "slurm_partition_cpus_idle", "slurm_partition_memory_bytes",
		"slurm_partition_gpus", "slurm_partition_gpus_allocated", "slurm_partition_info")

	compare(t, e, `
# HELP slurm_jobs Jobs slurmctld knows (finished ones until MinJobAge purges them) by partition and base state.
# TYPE slurm_jobs gauge
slurm_jobs{cluster="slurm/c1",partition="all",state="completed"} 1
slurm_jobs{cluster="slurm/c1",partition="all",state="pending"} 1
slurm_jobs{cluster="slurm/c1",partition="gpu",state="pending"} 1
slurm_jobs{cluster="slurm/c1",partition="gpu",state="running"} 1
# HELP slurm_jobs_cpus CPUs of jobs (allocated, or requested while pending) by partition and base state.
# TYPE slurm_jobs_cpus gauge
slurm_jobs_cpus{cluster="slurm/c1",partition="all",state="completed"} 2
slurm_jobs_cpus{cluster="slurm/c1",partition="all",state="pending"} 1
slurm_jobs_cpus{cluster="slurm/c1",partition="gpu",state="pending"} 4
slurm_jobs_cpus{cluster="slurm/c1",partition="gpu",state="running"} 16
# HELP slurm_jobs_pending Pending jobs by partition and Slurm's reason.
# TYPE slurm_jobs_pending gauge
slurm_jobs_pending{cluster="slurm/c1",partition="all",reason="Priority"} 1
slurm_jobs_pending{cluster="slurm/c1",partition="gpu",reason="Resources"} 1
# HELP slurm_account_jobs Jobs by account and base state (only with per-user series enabled).
# TYPE slurm_account_jobs gauge
slurm_account_jobs{account="ml",cluster="slurm/c1",state="pending"} 1
slurm_account_jobs{account="ml",cluster="slurm/c1",state="running"} 1
slurm_account_jobs{account="phys",cluster="slurm/c1",state="completed"} 1
slurm_account_jobs{account="phys",cluster="slurm/c1",state="pending"} 1
# HELP slurm_user_jobs_cpus CPUs of jobs by user and base state (only with per-user series enabled).
# TYPE slurm_user_jobs_cpus gauge
slurm_user_jobs_cpus{cluster="slurm/c1",state="completed",user="bob"} 2
slurm_user_jobs_cpus{cluster="slurm/c1",state="pending",user="ada"} 4
slurm_user_jobs_cpus{cluster="slurm/c1",state="pending",user="bob"} 1
slurm_user_jobs_cpus{cluster="slurm/c1",state="running",user="ada"} 16
`, "slurm_jobs", "slurm_jobs_cpus", "slurm_jobs_pending", "slurm_account_jobs", "slurm_user_jobs_cpus")

	compare(t, e, `
# HELP slurm_diag_reset_timestamp_seconds When slurmctld last reset its statistics (daily at midnight, on restart and by sdiag --reset); every *_since_reset and mean or max value counts from here.
# TYPE slurm_diag_reset_timestamp_seconds gauge
slurm_diag_reset_timestamp_seconds{cluster="slurm/c1"} 1.69992e+09
# HELP slurm_scheduler_jobs_since_reset Jobs by event since the statistics' reset: submitted, started, completed, canceled, failed.
# TYPE slurm_scheduler_jobs_since_reset gauge
slurm_scheduler_jobs_since_reset{cluster="slurm/c1",event="canceled"} 0
slurm_scheduler_jobs_since_reset{cluster="slurm/c1",event="completed"} 0
slurm_scheduler_jobs_since_reset{cluster="slurm/c1",event="failed"} 0
slurm_scheduler_jobs_since_reset{cluster="slurm/c1",event="started"} 30
slurm_scheduler_jobs_since_reset{cluster="slurm/c1",event="submitted"} 40
# HELP slurm_scheduler_cycle_last_seconds Duration of the main scheduler's last cycle.
# TYPE slurm_scheduler_cycle_last_seconds gauge
slurm_scheduler_cycle_last_seconds{cluster="slurm/c1"} 0.0015
# HELP slurm_scheduler_cycles_since_reset Main scheduler cycles since the reset.
# TYPE slurm_scheduler_cycles_since_reset gauge
slurm_scheduler_cycles_since_reset{cluster="slurm/c1"} 120
# HELP slurm_backfill_active 1 while a backfill cycle runs.
# TYPE slurm_backfill_active gauge
slurm_backfill_active{cluster="slurm/c1"} 1
# HELP slurm_backfill_jobs_since_reset Jobs started by backfill since the reset.
# TYPE slurm_backfill_jobs_since_reset gauge
slurm_backfill_jobs_since_reset{cluster="slurm/c1"} 9
# HELP slurm_backfill_cycle_mean_seconds Mean backfill cycle since the reset.
# TYPE slurm_backfill_cycle_mean_seconds gauge
slurm_backfill_cycle_mean_seconds{cluster="slurm/c1"} 0.005
# HELP slurm_backfill_last_cycle_timestamp_seconds When the last backfill cycle ran (absent before the first).
# TYPE slurm_backfill_last_cycle_timestamp_seconds gauge
slurm_backfill_last_cycle_timestamp_seconds{cluster="slurm/c1"} 1.70000005e+09
`, "slurm_diag_reset_timestamp_seconds", "slurm_scheduler_jobs_since_reset", "slurm_scheduler_cycle_last_seconds",
		"slurm_scheduler_cycles_since_reset", "slurm_backfill_active", "slurm_backfill_jobs_since_reset",
		"slurm_backfill_cycle_mean_seconds", "slurm_backfill_last_cycle_timestamp_seconds")
}

func TestUserSeriesOnlyBehindTheFlag(t *testing.T) {
	e, _ := newExporter(t, known(t), Options{})
	e.Refresh(context.Background())
	for _, name := range []string{"slurm_user_jobs", "slurm_user_jobs_cpus", "slurm_account_jobs", "slurm_account_jobs_cpus"} {
		if n := testutil.CollectAndCount(e, name); n != 0 {
			t.Errorf("%s: %d series without UserSeries", name, n)
		}
	}
	if n := testutil.CollectAndCount(e, "slurm_jobs"); n != 4 {
		t.Errorf("slurm_jobs: %d series, want 4", n)
	}
}

// restCalls are the fake's calls of every read the exporter may make.
func restCalls(f *slurmfake.Fake) map[string]int {
	out := map[string]int{}
	for _, m := range []string{"ListNodes", "GetNode", "ListJobs", "ListJobStates", "GetJob", "ListPartitions", "GetPartition", "Diag", "Ping"} {
		out[m] = f.Calls(m)
	}
	return out
}

func TestScrapesCostNoRequests(t *testing.T) {
	f := known(t)
	e, _ := newExporter(t, f, Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	e.Refresh(context.Background())
	one := map[string]int{"ListNodes": 1, "ListJobs": 1, "ListJobStates": 1, "ListPartitions": 1, "Diag": 1,
		"GetNode": 0, "GetJob": 0, "GetPartition": 0, "Ping": 0}
	if got := restCalls(f); !equal(got, one) {
		t.Fatalf("one refresh made %v, want %v", got, one)
	}
	for range 100 {
		mfs, err := reg.Gather()
		if err != nil || len(mfs) == 0 {
			t.Fatalf("scrape: %d families, %v", len(mfs), err)
		}
	}
	if got := restCalls(f); !equal(got, one) {
		t.Fatalf("100 scrapes after one refresh made %v, want %v", got, one)
	}
	e.Refresh(context.Background())
	// Jobs: the second refresh reads the states only (nothing changed).
	two := map[string]int{"ListNodes": 2, "ListJobs": 1, "ListJobStates": 2, "ListPartitions": 2, "Diag": 2,
		"GetNode": 0, "GetJob": 0, "GetPartition": 0, "Ping": 0}
	if got := restCalls(f); !equal(got, two) {
		t.Fatalf("a second refresh made %v, want %v", got, two)
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// fakeNodes is a node cache polled by someone else (the syncer's Informer in sunk-syncer).
type fakeNodes struct {
	nodes []slurm.Node
	err   error
	at    time.Time
}

func (n *fakeNodes) List() []slurm.Node     { return append([]slurm.Node(nil), n.nodes...) }
func (n *fakeNodes) LastError() error       { return n.err }
func (n *fakeNodes) LastSuccess() time.Time { return n.at }

func TestSharedNodeCacheCostsNoNodeRequests(t *testing.T) {
	f := known(t)
	src := &fakeNodes{nodes: []slurm.Node{{Name: "x-0", State: []string{"IDLE"}, CPUs: 4, Partitions: []string{"all"}}}}
	e, clk := newExporter(t, f, Options{Interval: 10 * time.Second}, func(tg *Target) { tg.Nodes = src })
	src.at = clk.now()
	e.Refresh(context.Background())
	if f.Calls("ListNodes") != 0 || f.Calls("GetNode") != 0 {
		t.Fatalf("with a shared node cache the exporter listed nodes itself: ListNodes %d, GetNode %d", f.Calls("ListNodes"), f.Calls("GetNode"))
	}
	compare(t, e, `
# HELP slurm_up 1 when the last refresh read every part of Slurm's state (nodes, jobs, partitions, diag); 0 otherwise.
# TYPE slurm_up gauge
slurm_up{cluster="slurm/c1"} 1
# HELP slurm_node_cpus_idle CPUs of a node that can take jobs and are not allocated (0 on a node that takes no jobs: down, drained, ...).
# TYPE slurm_node_cpus_idle gauge
slurm_node_cpus_idle{cluster="slurm/c1",node="x-0"} 4
`, "slurm_up", "slurm_node_cpus_idle")

	// A cache nobody refreshed for longer than the stale limit is a failed read.
	clk.add(31 * time.Second)
	e.Refresh(context.Background())
	if e.Err(c1) == nil || testutil.ToFloat64(collectorOf(e, "slurm_up")) != 0 {
		t.Fatal("a stale node cache left slurm_up at 1")
	}
	// So is a cache whose last poll failed.
	src.at, src.err = clk.now(), slurm.ErrUnavailable
	e.Refresh(context.Background())
	if testutil.ToFloat64(collectorOf(e, "slurm_up")) != 0 {
		t.Fatal("a failing node cache left slurm_up at 1")
	}
}

// collectorOf collects only the metrics of one name from e (for testutil.ToFloat64).
func collectorOf(e *Exporter, name string) prometheus.Collector {
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		all := make(chan prometheus.Metric)
		go func() { e.Collect(all); close(all) }()
		for m := range all {
			if strings.Contains(m.Desc().String(), `fqName: "`+name+`"`) {
				ch <- m
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

func TestSlurmDown(t *testing.T) {
	f := known(t)
	e, clk := newExporter(t, f, Options{Interval: 10 * time.Second})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	e.Refresh(context.Background())
	good := testutil.CollectAndCount(e, "slurm_node_cpus")

	f.SetError("*", errors.Join(slurm.ErrUnavailable, errors.New("connection refused")))
	clk.add(10 * time.Second)
	e.Refresh(context.Background())
	compare(t, e, `
# HELP slurm_up 1 when the last refresh read every part of Slurm's state (nodes, jobs, partitions, diag); 0 otherwise.
# TYPE slurm_up gauge
slurm_up{cluster="slurm/c1"} 0
# HELP slurm_exporter_collect_errors_total Failed reads of a part of Slurm's state (nodes, jobs, partitions, diag).
# TYPE slurm_exporter_collect_errors_total counter
slurm_exporter_collect_errors_total{cluster="slurm/c1",part="diag"} 1
slurm_exporter_collect_errors_total{cluster="slurm/c1",part="jobs"} 1
slurm_exporter_collect_errors_total{cluster="slurm/c1",part="nodes"} 1
slurm_exporter_collect_errors_total{cluster="slurm/c1",part="partitions"} 1
# HELP slurm_exporter_last_success_timestamp_seconds When a part of Slurm's state was last read successfully; its values are served until they are older than the stale limit.
# TYPE slurm_exporter_last_success_timestamp_seconds gauge
slurm_exporter_last_success_timestamp_seconds{cluster="slurm/c1",part="diag"} 1.7e+09
slurm_exporter_last_success_timestamp_seconds{cluster="slurm/c1",part="jobs"} 1.7e+09
slurm_exporter_last_success_timestamp_seconds{cluster="slurm/c1",part="nodes"} 1.7e+09
slurm_exporter_last_success_timestamp_seconds{cluster="slurm/c1",part="partitions"} 1.7e+09
`, "slurm_up", "slurm_exporter_collect_errors_total", "slurm_exporter_last_success_timestamp_seconds")
	// The last good values are served while they are fresh enough ...
	if n := testutil.CollectAndCount(e, "slurm_node_cpus"); n != good || good != 4 {
		t.Fatalf("slurm_node_cpus: %d series while Slurm is down, %d before", n, good)
	}
	// ... and dropped once they are older than the stale limit (3 intervals), while slurm_up
	// and the exporter's own series stay.
	clk.add(21 * time.Second)
	for _, name := range []string{"slurm_node_cpus", "slurm_jobs", "slurm_partition_info", "slurm_backfill_active"} {
		if n := testutil.CollectAndCount(e, name); n != 0 {
			t.Errorf("%s: %d series %s after the last good read", name, n, 31*time.Second)
		}
	}
	if n := testutil.CollectAndCount(e, "slurm_up"); n != 1 {
		t.Fatalf("slurm_up: %d series", n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}

	// Back: everything returns.
	f.SetError("*", nil)
	e.Refresh(context.Background())
	if e.Err(c1) != nil || testutil.CollectAndCount(e, "slurm_node_cpus") != 4 {
		t.Fatalf("after Slurm came back: %v, %d node series", e.Err(c1), testutil.CollectAndCount(e, "slurm_node_cpus"))
	}
}

func TestIllegalLabelValues(t *testing.T) {
	f := slurmfake.New()
	odd := "p\"art\\it\nion \xff"
	f.AddPartition(slurm.Partition{Name: odd, State: []string{"UP"}})
	f.AddNode(slurm.Node{Name: "n\xff1", State: []string{"IDLE"}, Partitions: []string{odd}, CPUs: 2, Reason: "bad \xfe"})
	// A node literally named like the escaped spelling of the one above: one series, no
	// duplicate that would fail the whole scrape.
	f.AddNode(slurm.Node{Name: `n\xff1`, State: []string{"IDLE"}, Partitions: []string{odd}, CPUs: 2})
	f.AddNode(slurm.Node{Name: "ok-ü", State: []string{"IDLE"}, Partitions: []string{odd}, CPUs: 2})
	e, _ := newExporter(t, f, Options{})
	e.Refresh(context.Background())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := parser.TextToMetricFamilies(strings.NewReader(text.String()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, text.String())
	}
	cpus := parsed["slurm_node_cpus"]
	if cpus == nil || len(cpus.Metric) != 2 {
		t.Fatalf("slurm_node_cpus: %v", cpus)
	}
	names := map[string]bool{}
	for _, m := range cpus.Metric {
		for _, l := range m.Label {
			if l.GetName() == "node" {
				names[l.GetValue()] = true
			}
		}
	}
	if !names[`n\xff1`] || !names["ok-ü"] {
		t.Fatalf("node labels %v", names)
	}
	part := parsed["slurm_partition_cpus"]
	if part == nil || len(part.Metric) != 1 || part.Metric[0].GetGauge().GetValue() != 6 {
		t.Fatalf("slurm_partition_cpus: %v", part)
	}
	for _, l := range part.Metric[0].Label {
		if l.GetName() == "partition" && l.GetValue() != "p\"art\\it\nion \\xff" {
			t.Fatalf("partition label %q", l.GetValue())
		}
	}
}

func TestClusterGoneTakesItsSeries(t *testing.T) {
	f := known(t)
	targets := []Target{{Name: "a/one", Slurm: f}, {Name: "b/two", Slurm: known(t)}}
	var mu sync.Mutex
	e := New(func() []Target { mu.Lock(); defer mu.Unlock(); return targets }, Options{})
	e.Refresh(context.Background())
	if n := testutil.CollectAndCount(e, "slurm_up"); n != 2 {
		t.Fatalf("slurm_up: %d series, want 2", n)
	}
	mu.Lock()
	targets = targets[1:]
	mu.Unlock()
	e.Refresh(context.Background())
	want := `
# HELP slurm_up 1 when the last refresh read every part of Slurm's state (nodes, jobs, partitions, diag); 0 otherwise.
# TYPE slurm_up gauge
slurm_up{cluster="b/two"} 1
`
	compare(t, e, want, "slurm_up")
	if err := e.Err("a/one"); err == nil {
		t.Fatal("a/one is still known")
	}
}

func TestGPUs(t *testing.T) {
	for gres, want := range map[string]int{
		"": 0, "(null)": 0, "gpu": 1, "gpu:4": 4, "gpu:a100": 1, "gpu:a100:4": 4, "gpu:a100:4(S:0-1)": 4,
		"gpu:a100:2(S:0,1),gpu:h100:2": 4, "gpu:a100:1(IDX:0),shard:a100:0(0/8,0/8)": 1, "gres/gpu:2": 2,
		"shard:8": 0, "gpu:a100:0(IDX:N/A)": 0,
	} {
		if got := GPUs(gres); got != want {
			t.Errorf("GPUs(%q) = %d, want %d", gres, got, want)
		}
	}
}

func TestNodeState(t *testing.T) {
	for _, c := range []struct {
		state []string
		alloc int
		want  string
	}{
		{[]string{"IDLE"}, 0, "idle"},
		{[]string{"IDLE", "DRAIN"}, 0, "drained"},
		{[]string{"MIXED", "DRAIN"}, 2, "draining"},
		{[]string{"IDLE", "DRAIN", "COMPLETING"}, 0, "draining"},
		{[]string{"DOWN", "DRAIN"}, 0, "drained"},
		{[]string{"ALLOCATED", "COMPLETING"}, 4, "completing"},
		{[]string{"IDLE", "MAINTENANCE", "RESERVED"}, 0, "maint"},
		{[]string{"IDLE", "FAIL"}, 0, "fail"},
		{[]string{"FUTURE"}, 0, "future"},
		{nil, 0, "unknown"},
	} {
		n := slurm.Node{State: c.state, AllocCPUs: c.alloc}
		if got := NodeState(&n); got != c.want {
			t.Errorf("NodeState(%v) = %q, want %q", c.state, got, c.want)
		}
	}
}

// blockingDiag holds Diag until released, to scrape during a refresh.
type blockingDiag struct {
	*slurmfake.Fake
	entered, release chan struct{}
}

func (b blockingDiag) Diag(ctx context.Context) (*slurm.Diag, error) {
	close(b.entered)
	<-b.release
	return b.Fake.Diag(ctx)
}

func TestNoSeriesBeforeTheFirstRefresh(t *testing.T) {
	b := blockingDiag{Fake: known(t), entered: make(chan struct{}), release: make(chan struct{})}
	e := New(func() []Target { return []Target{{Name: c1, Slurm: b}} }, Options{})
	done := make(chan struct{})
	go func() { e.Refresh(context.Background()); close(done) }()
	<-b.entered
	if n := testutil.CollectAndCount(e); n != 0 {
		t.Errorf("%d series during the first refresh (a slurm_up 0 before any read would page someone)", n)
	}
	close(b.release)
	<-done
	if v := testutil.ToFloat64(collectorOf(e, "slurm_up")); v != 1 {
		t.Fatalf("slurm_up %v after the first refresh", v)
	}
}
