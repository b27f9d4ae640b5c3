//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"sunk.dev/sunk/pkg/wellknown"
)

// defaultProfile adds kube-scheduler's default profile to the same scheduler process, so that
// both schedulers run on the same nodes, the same apiserver and the same client limits.
const defaultProfile = "- schedulerName: default-scheduler\n"

// BenchmarkThousandPods sends 1,000 pods (SUNK_BENCH_PODS) through the default kube-scheduler,
// then through sunk-scheduler (Slurm partition "bench", non-exclusive), on the same three nodes
// in one run, and reports pods bound per second and p50/p99 creation-to-bind latency. Each pod
// is deleted as soon as it is bound (its job is then cancelled), as short work would be.
// Run with -bench ThousandPods -benchtime 1x; SUNK_BENCH_POLL sets the plugin's Slurm poll
// interval (default 200ms).
func BenchmarkThousandPods(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("SUNK_BENCH_PODS")); err == nil && v > 0 {
		n = v
	}
	e := setup(b)
	e.pollInterval = os.Getenv("SUNK_BENCH_POLL")
	// The benchmark's namespaces may ask for partition bench (a namespace in no tenant gets
	// only the default partition, and its pods would wait for ever).
	bench := testsTenant
	bench.Name, bench.Namespaces = "bench", []string{benchNamespace("sunk-scheduler")}
	e.setTenants(testsTenant, bench)
	e.startScheduler(defaultProfile)
	results := map[string]benchResult{}
	cpu := map[string]map[string]float64{} // phase → process → CPU ms per pod
	var writes []string
	for _, sched := range []string{"default-scheduler", "sunk-scheduler"} {
		before, cpuBefore := e.apiserverRequests(), cpuTicks(b)
		stopProfile := profilePhase(b, sched)
		r := e.bindMany(sched, n)
		stopProfile()
		cpu[sched] = cpuPerPod(cpuBefore, cpuTicks(b), n)
		writes = append(writes, requestLine("apiserver_"+sched, before, e.apiserverRequests()),
			cpuLine("cpu_ms_per_pod_"+sched, cpu[sched]))
		results[sched] = r
		b.ReportMetric(r.perSec, sched+"-pods/s")
		b.ReportMetric(r.p50.Seconds()*1000, sched+"-p50-ms")
		b.ReportMetric(r.p99.Seconds()*1000, sched+"-p99-ms")
		b.Logf("%s: %d pods bound in %v: %.1f pods/s, creation-to-bind p50 %v p99 %v",
			sched, n, r.total.Round(time.Millisecond), r.perSec, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond))
	}
	sunk, def := results["sunk-scheduler"], results["default-scheduler"]
	phases := phaseMeans(b, "sunk_scheduler_phase_seconds")
	release := phaseMeans(b, "sunk_scheduler_release_seconds")
	// The passes of both phases (the loop runs throughout); the REST profile before the
	// Slurm-only run, whose jobs the plugin reads too.
	passes, passSeconds := histogramTotals(b, "sunk_scheduler_lifecycle_pass_seconds")
	rest := restProfile(b)
	// How the immediate allocations were answered (refusals by Slurm's error number), and the
	// scheduling cycles of each profile by result (cycles per bound pod).
	asked := counterLine(b, "allocations", "sunk_scheduler_allocations_total")
	attempts := counterLine(b, "attempts", "scheduler_schedule_attempts_total")
	cpuBefore := cpuTicks(b)
	alone, aloneRefused := e.slurmOnly(n)
	cpu["slurm-only"] = cpuPerPod(cpuBefore, cpuTicks(b), n)
	b.Logf("slurm alone: %d allocations made and cancelled in %v (%d refusals asked again): %.1f jobs/s, request-to-allocated p50 %v p99 %v",
		n, alone.total.Round(time.Millisecond), aloneRefused, alone.perSec, alone.p50.Round(time.Millisecond), alone.p99.Round(time.Millisecond))
	fmt.Printf("bench: pods=%d sunk_pods_per_s=%.1f default_pods_per_s=%.1f ratio=%.3f p50_s=%.3f p99_s=%.3f default_p99_s=%.3f"+
		" slurm_only_jobs_per_s=%.1f slurm_only_p99_s=%.3f ratio_to_slurm_only=%.3f"+
		" queue_mean_s=%.3f submit_mean_s=%.3f pending_mean_s=%.3f detect_mean_s=%.3f activate_mean_s=%.3f bind_mean_s=%.3f\n",
		n, sunk.perSec, def.perSec, sunk.perSec/def.perSec, sunk.p50.Seconds(), sunk.p99.Seconds(), def.p99.Seconds(),
		alone.perSec, alone.p99.Seconds(), sunk.perSec/alone.perSec,
		phases["queue"], phases["submit"], phases["pending"], phases["detect"], phases["activate"], phases["bind"])
	fmt.Printf("bench: release_notice_mean_s=%.3f release_cancel_mean_s=%.3f release_complete_mean_s=%.3f lifecycle_passes=%d lifecycle_pass_mean_ms=%.2f\n",
		release["notice"], release["cancel"], release["complete"], passes, 1000*passSeconds/float64(max(passes, 1)))
	fmt.Println(rest)
	for _, l := range writes {
		fmt.Println(l)
	}
	fmt.Println(asked)
	fmt.Println(attempts)
	fmt.Println(cpuLine("cpu_ms_per_pod_slurm_only", cpu["slurm-only"]) + fmt.Sprintf(" refused=%d", aloneRefused))
	fmt.Println(ceilingLine(cpu, sunk.perSec, runtime.NumCPU()))
}

// slurmProcesses are the benchProcesses that are Slurm's; the others (and the test process:
// the schedulers, the plugin, its informers) are the Kubernetes side.
var slurmProcesses = []string{"slurmctld", "slurmrestd", "slurmd"}

// sides splits a phase's CPU per pod into Slurm's daemons and the rest.
func sides(perPod map[string]float64) (kube, slurm float64) {
	for k, ms := range perPod {
		if slices.Contains(slurmProcesses, k) {
			slurm += ms
		} else {
			kube += ms
		}
	}
	return kube, slurm
}

// ceilingLine is sunk-scheduler's rate against what this machine allows, from the CPU the run
// measured (issue 42): a pod through Slurm costs at least the default scheduler's Kubernetes-side
// CPU per pod (Kubernetes' floor; the Slurm daemons' CPU in that phase is sunk-scheduler's
// informers polling, which its own phase has too) plus Slurm's daemons' CPU per allocation when
// allocations come straight through slurmrestd, each asked for, read back and cancelled (Slurm's
// floor, the slurm-only phase); with every
// core busy, the ceiling is the cores' milliseconds per second over that sum. share is sunk's
// rate over the ceiling; kube_ratio and slurm_ratio are sunk's own CPU per pod on each side over
// that side's floor.
func ceilingLine(cpu map[string]map[string]float64, sunkPerSec float64, cores int) string {
	defKube, _ := sides(cpu["default-scheduler"])
	sunkKube, sunkSlurm := sides(cpu["sunk-scheduler"])
	_, floor := sides(cpu["slurm-only"])
	ceiling := float64(cores) * 1000 / (defKube + floor)
	return fmt.Sprintf("bench: name=ceiling cores=%d ceiling_pods_per_s=%.1f share=%.3f"+
		" kube_cpu_ms=%.2f default_kube_cpu_ms=%.2f kube_ratio=%.3f slurm_cpu_ms=%.2f floor_cpu_ms=%.2f slurm_ratio=%.3f",
		cores, ceiling, sunkPerSec/ceiling, sunkKube, defKube, sunkKube/defKube, sunkSlurm, floor, sunkSlurm/floor)
}

// counterLine reads a counter from the process's registry as one bench line: a name=value per
// series, the name its non-empty label values in label-name order (allocations:
// 2016_refused=…, started=…; kube-scheduler's attempts: default-scheduler_scheduled=…).
func counterLine(b *testing.B, title, metric string) string {
	counts := map[string]float64{}
	for _, m := range gathered(b, metric) {
		name := ""
		for _, l := range m.Label {
			if l.GetValue() != "" {
				name += "_" + l.GetValue()
			}
		}
		counts[strings.TrimPrefix(name, "_")] += m.Counter.GetValue()
	}
	line := "bench: " + title
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		line += fmt.Sprintf(" %s=%.0f", k, counts[k])
	}
	return line
}

// restProfile reads sunk_slurm_rest_request_duration_seconds from the process's registry: per
// endpoint, how many requests the run made and their mean seconds, as one bench line (where
// slurmrestd's time went).
func restProfile(b *testing.B) string {
	type stat struct {
		n   uint64
		sum float64
	}
	by := map[string]*stat{}
	for _, m := range gathered(b, "sunk_slurm_rest_request_duration_seconds") {
		var ep string
		for _, l := range m.Label {
			if l.GetName() == "endpoint" {
				ep = l.GetValue()
			}
		}
		if by[ep] == nil {
			by[ep] = &stat{}
		}
		by[ep].n += m.Histogram.GetSampleCount()
		by[ep].sum += m.Histogram.GetSampleSum()
	}
	eps := slices.Sorted(maps.Keys(by))
	line := "bench: rest"
	for _, ep := range eps {
		// "GET /job/{job_id}" → get_job_job_id
		name := strings.Join(strings.FieldsFunc(strings.ToLower(ep), func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < '0' || r > '9')
		}), "_")
		line += fmt.Sprintf(" %s_n=%d %s_mean_ms=%.1f", name, by[ep].n, name, 1000*by[ep].sum/float64(max(by[ep].n, 1)))
	}
	return line
}

// apiserverRequests is the apiserver's apiserver_request_total summed over response codes, by
// verb and resource ("POST pods/binding"): what each scheduler's phase costs the apiserver.
func (e *env) apiserverRequests() map[string]float64 {
	e.t.Helper()
	raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(e.ctx)
	if err != nil {
		e.t.Fatalf("apiserver metrics: %v", err)
	}
	mfs, err := new(expfmt.TextParser).TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		e.t.Fatalf("apiserver metrics: %v", err)
	}
	out := map[string]float64{}
	for _, m := range mfs["apiserver_request_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.Label {
			l[p.GetName()] = p.GetValue()
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += m.Counter.GetValue()
	}
	return out
}

// requestLine is the requests between two apiserverRequests readings per verb+resource, as one
// bench line (watches left out: they are open connections, not work per pod).
func requestLine(title string, before, after map[string]float64) string {
	line := "bench: " + title
	for _, k := range slices.Sorted(maps.Keys(after)) {
		verb, _, _ := strings.Cut(k, " ")
		if d := after[k] - before[k]; d > 0 && verb != "WATCH" {
			line += fmt.Sprintf(" %s=%.0f", strings.NewReplacer(" ", "_", "/", "_").Replace(strings.ToLower(k)), d)
		}
	}
	return line
}

// profilePhase writes a CPU profile of this process during sunk-scheduler's phase alone to
// $SUNK_BENCH_CPUPROFILE, when set (go test's -cpuprofile covers the whole run: setup, the
// default scheduler's phase and Slurm alone). It returns what stops it.
func profilePhase(b *testing.B, sched string) func() {
	path := os.Getenv("SUNK_BENCH_CPUPROFILE")
	if path == "" || sched != "sunk-scheduler" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchProcesses are the processes whose CPU time a phase's cpu line shows, by command name;
// "test" is this process (both schedulers, the plugin, the informers).
var benchProcesses = []string{"slurmctld", "slurmrestd", "slurmd", "kube-apiserver", "etcd"}

// cpuTicks is the CPU time (user+system, in clock ticks) used so far by each of benchProcesses
// (summed over processes of the same name) and by this process, from /proc.
func cpuTicks(b *testing.B) map[string]uint64 {
	out := map[string]uint64{}
	self := fmt.Sprintf("/proc/%d/stat", os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // exited since the glob
		}
		// pid (comm) state ppid ...: utime and stime are fields 14 and 15, counted from the pid.
		open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || end < open {
			continue
		}
		name, rest := string(raw[open+1:end]), strings.Fields(string(raw[end+1:]))
		if f == self {
			name = "test"
		} else if !slices.Contains(benchProcesses, name) {
			continue
		}
		if len(rest) < 13 {
			continue
		}
		u, _ := strconv.ParseUint(rest[11], 10, 64)
		s, _ := strconv.ParseUint(rest[12], 10, 64)
		out[name] += u + s
	}
	if out["test"] == 0 {
		b.Fatal("no CPU time read for this process from /proc")
	}
	return out
}

// cpuPerPod is the CPU milliseconds per pod each process used between two cpuTicks readings.
func cpuPerPod(before, after map[string]uint64, pods int) map[string]float64 {
	const msPerTick = 10 // USER_HZ is 100 on Linux
	out := map[string]float64{}
	for k := range after {
		out[k] = float64(after[k]-before[k]) * msPerTick / float64(pods)
	}
	return out
}

// cpuLine is a phase's CPU milliseconds per pod by process as one bench line, with their
// total: on this machine both cores are busy during a phase, so the total per pod is what
// bounds the rate.
func cpuLine(title string, perPod map[string]float64) string {
	line, total := "bench: "+title, 0.0
	for _, k := range slices.Sorted(maps.Keys(perPod)) {
		total += perPod[k]
		line += fmt.Sprintf(" %s=%.2f", strings.ReplaceAll(k, "-", "_"), perPod[k])
	}
	return line + fmt.Sprintf(" total=%.2f", total)
}

// phaseMeans reads sunk-scheduler's sunk_scheduler_phase_seconds from the process's registry:
// the mean seconds of each phase (submit, detect, bind).
func phaseMeans(b *testing.B, metric string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range gathered(b, metric) {
		for _, l := range m.Label {
			if h := m.Histogram; l.GetName() == "phase" && h.GetSampleCount() > 0 {
				out[l.GetValue()] = h.GetSampleSum() / float64(h.GetSampleCount())
			}
		}
	}
	return out
}

// histogramTotals is a histogram's sample count and sum over its series in the process's
// registry.
func histogramTotals(b *testing.B, metric string) (n uint64, sum float64) {
	for _, m := range gathered(b, metric) {
		n += m.Histogram.GetSampleCount()
		sum += m.Histogram.GetSampleSum()
	}
	return n, sum
}

// gathered is the series of one metric in the process's registry (kube-scheduler's and the
// plugin's: the benchmark runs both in-process).
func gathered(b *testing.B, name string) []*dto.Metric {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric
		}
	}
	return nil
}

func benchNamespace(sched string) string { return "bench-" + sched }

type benchResult struct {
	total    time.Duration
	perSec   float64
	p50, p99 time.Duration
}

// bindMany creates n pods for the scheduler in a namespace of their own, deletes each once it
// is bound, and measures from just before its Create call to the informer event showing it
// bound.
func (e *env) bindMany(sched string, n int) benchResult {
	e.t.Helper()
	ns := benchNamespace(sched)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// An informer, not a bare watch: the apiserver may end a watch, an informer resumes it.
	boundCh := make(chan *v1.Pod, 2*n)
	factory := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))
	onChange := func(obj any) {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" {
			boundCh <- p
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onChange, UpdateFunc: func(_, obj any) { onChange(obj) },
	}); err != nil {
		e.t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	latencies := make([]time.Duration, 0, n)
	deletes := make(chan string, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range deletes {
				_ = e.cs.CoreV1().Pods(ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}()
	}
	defer func() { close(deletes); wg.Wait() }()

	start := time.Now()
	names := make(chan int, n)
	for i := range n {
		names <- i
	}
	close(names)
	for range 8 {
		go func() {
			for i := range names {
				name := fmt.Sprintf("p-%04d", i)
				p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
					Annotations: map[string]string{wellknown.AnnotationPartition: "bench", wellknown.AnnotationExclusive: "false"}},
					Spec: v1.PodSpec{SchedulerName: sched, Containers: []v1.Container{{Name: "c", Image: "c",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("10Mi")}}}}}}
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
				if _, err := e.cs.CoreV1().Pods(ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
					e.t.Errorf("create %s: %v", name, err)
				}
			}
		}()
	}

	bound := map[string]bool{}
	// A run that stops binding fails after a minute without progress, not after the whole
	// budget.
	const stall = time.Minute
	progress := time.NewTimer(stall)
	defer progress.Stop()
	for len(bound) < n {
		select {
		case p := <-boundCh:
			if bound[p.Name] {
				continue
			}
			now := time.Now()
			bound[p.Name] = true
			mu.Lock()
			latencies = append(latencies, now.Sub(created[p.Name]))
			mu.Unlock()
			deletes <- p.Name
			progress.Reset(stall)
		case <-progress.C:
			e.t.Fatalf("%s: %d of %d pods bound, none in the last %v", sched, len(bound), n, stall)
		}
	}
	total := time.Since(start)
	slices.Sort(latencies)
	q := func(f float64) time.Duration { return latencies[min(len(latencies)-1, int(f*float64(len(latencies))))] }
	return benchResult{total: total, perSec: float64(n) / total.Seconds(), p50: q(0.50), p99: q(0.99)}
}
