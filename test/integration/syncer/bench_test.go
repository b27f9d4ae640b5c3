//go:build integration

package syncer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// BenchmarkSyncer runs the syncer against the real slurmctld/slurmrestd with N extra node
// records and a real kube-apiserver with N Kubernetes nodes and N compute pods (API objects:
// no kubelet). The records are FUTURE nodes (`scontrol create ... state=future`), because
// this machine cannot run thousands of slurmd; the syncer lists, diffs and drains them like
// any other. It reports:
//   - sync-s: the first full sync (mirror on every pod and node);
//   - k8s->slurm-p50/p99-ms: cordon a node until Slurm shows its node drained;
//   - slurm->k8s-p50/p99-ms: drain in Slurm until the pod's annotation shows it;
//   - req/s, B/s: the syncer's traffic over a minute of steady state (slurmctld bumps its node
//     table's timestamp every 20-40 s, so the window holds such bumps): to slurmrestd, and to
//     the node watcher on the watcher path;
//   - ctld-rpc/s, node-info-rpc/s: the RPCs slurmctld served over the same minute (sdiag; the
//     watcher's reader, and slurmrestd's on the REST path; the test bed is shared, so another
//     test's RPCs count too);
//   - watcher-cpu-s/min: the CPU of the node watcher (the real sunk-nodewatch process and its
//     reader, from /proc) over the same minute;
//   - drain100-ms: 100 nodes drained in Slurm by one update, until all 100 pods show it;
//   - cpu-%, heap-MB: the process (syncer and its caches) over the same minute.
//
// The watcher reads every 200 ms, sunk-nodewatch's default. SUNK_BENCH_NODES sets the sizes
// (default 1000,5000); SUNK_BENCH_PRIVATE=1 runs against a Slurm of the benchmark's own
// (privateBench: more than the shared bed's 6,000 records, and sdiag counting only the
// benchmark's RPCs).
//
// Run: go test -tags integration -run '^$' -bench Syncer -benchtime 1x -timeout 60m ./test/integration/syncer/
func BenchmarkSyncer(b *testing.B) {
	sizes := []int{1000, 5000}
	if v := os.Getenv("SUNK_BENCH_NODES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 200 || n > 99999 {
				b.Fatalf("SUNK_BENCH_NODES: %q is not a node count from 200 to 99999", f)
			}
			sizes = append(sizes, n)
		}
	}
	env := benchEnv(b, sizes)
	for _, n := range sizes {
		for _, path := range []string{"rest", "watcher"} {
			b.Run(fmt.Sprintf("nodes=%d/path=%s", n, path), func(b *testing.B) {
				for b.Loop() {
					benchSync(b, env, n, path)
				}
			})
		}
	}
}

const samples = 40

// benchSync measures one path of Slurm's node state into the syncer: "rest" polls slurmrestd's
// node list, "watcher" reads the node watcher's changes (writes go through slurmrestd in both).
func benchSync(b *testing.B, env *testenv.SlurmEnv, n int, path string) {
	name := func(i int) string { return fmt.Sprintf("sb%05d", i) }
	spec := fmt.Sprintf("nodename=sb[00000-%05d]", n-1)
	if out, err := env.Exec("scontrol", "create", spec, "state=future", "cpus=1", "realmemory=100", "features=sunk-bench"); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	defer func() {
		if out, err := env.Exec("scontrol", "delete", spec); err != nil {
			b.Errorf("cleanup: %v: %s", err, out)
		}
	}()
	cfg := testenv.API(b, testenv.APIOptions{})
	cfg.QPS, cfg.Burst = 5000, 5000 // the benchmark and the syncer, not client-side throttling
	h := newBenchHarness(b, env, cfg)
	ctx := context.Background()
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	testenv.Parallel(b, n, 32, func(i int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k8s-" + name(i)}}
		if err := h.c.Create(ctx, node); err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Bench"}}
		if err := h.c.Status().Update(ctx, node); err != nil {
			return err
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i), Labels: map[string]string{
				wellknown.LabelCluster: clusterName, wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelNodeSet: "bench"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "slurmd", Image: "x"}}},
		}
		if err := h.c.Create(ctx, pod); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return h.c.Status().Update(ctx, pod)
	})

	// The syncer, with its slurmrestd traffic counted.
	var reqs, bytes, full atomic.Int64
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(b), slurm.WithLifetime(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	counted, err := slurm.NewDiscovering(slurm.Config{URL: env.RESTURL, Tokens: tokens, HTTPClient: &http.Client{
		Timeout: 30 * time.Second, Transport: countingTransport{http.DefaultTransport, &reqs, &bytes, &full}}})
	if err != nil {
		b.Fatal(err)
	}
	cfg2 := syncer.Config{Namespace: ns, Cluster: clusterName, Slurm: counted,
		Owns: func(*slurm.Node) bool { return false }}
	watcherPID := 0
	if path == "watcher" {
		var url string
		url, watcherPID = nodewatchProcess(b, env, 200*time.Millisecond)
		wc, err := nodewatch.NewClient(url, 0, tokens)
		if err != nil {
			b.Fatal(err)
		}
		wc.SetTransport(countingTransport{http.DefaultTransport, &reqs, &bytes, &full})
		cfg2.NodeChanges = wc
	}
	start := time.Now()
	h.run(b, cfg2)
	// The first sync: every pod mirrors its FUTURE node.
	pollEvery(b, 10*time.Minute, 500*time.Millisecond, func() error {
		l := &corev1.PodList{}
		if err := h.c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for i := range l.Items {
			if l.Items[i].Annotations[wellknown.AnnotationSlurmState] == "future" {
				done++
			}
		}
		if done < n {
			return fmt.Errorf("%d of %d pods mirrored", done, n)
		}
		return nil
	})
	firstSync := time.Since(start).Seconds()
	b.ReportMetric(firstSync, "sync-s")

	// Steady state: nothing changes on either side.
	runtime.GC()
	reqs.Store(0)
	bytes.Store(0)
	full.Store(0)
	rpc0, watcher0 := rpcCounts(b, env), treeCPU(watcherPID)
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(time.Minute) // the measurement window itself, not a synchronisation
	wall := time.Since(t0).Seconds()
	ctldRPC, nodeInfoRPC := rpcRates(rpc0, rpcCounts(b, env), wall)
	watcherCPUPerMin := (treeCPU(watcherPID) - watcher0).Seconds() * 60 / wall
	b.ReportMetric(ctldRPC, "ctld-rpc/s")
	b.ReportMetric(nodeInfoRPC, "node-info-rpc/s")
	b.ReportMetric(watcherCPUPerMin, "watcher-cpu-s/min")
	steadyReqs, steadyBytes := float64(reqs.Load())/wall, float64(bytes.Load())/wall
	b.ReportMetric(steadyReqs, "rest-req/s")
	b.ReportMetric(steadyBytes, "rest-B/s")
	b.ReportMetric(float64(full.Load())/wall, "full-lists/s") // node lists answered other than 304
	syncerCPU := 100 * (cpuTime() - cpu0).Seconds() / wall
	b.ReportMetric(syncerCPU, "cpu-%")
	b.ReportMetric(testenv.HeapInUseMB(), "heap-MB")

	// Kubernetes -> Slurm: cordon, until Slurm shows the drain.
	direct := h.sl
	var toSlurm, toKube []time.Duration
	for k := range samples {
		i := k * (n / (2 * samples))
		jitter()
		t := time.Now()
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if err := h.c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k8s-" + name(i)}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
		pollEvery(b, 30*time.Second, 5*time.Millisecond, func() error {
			sn, err := direct.GetNode(ctx, name(i))
			if err != nil {
				return err
			}
			if !sn.Drained() {
				return fmt.Errorf("%s not drained", name(i))
			}
			return nil
		})
		toSlurm = append(toSlurm, time.Since(t))
	}
	// Slurm -> Kubernetes: drain in Slurm, until the pod's annotation says so.
	for k := range samples {
		i := n/2 + k*(n/(2*samples))
		jitter()
		t := time.Now()
		reason := "bench " + name(i)
		if err := direct.UpdateNode(ctx, name(i), slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err != nil {
			b.Fatal(err)
		}
		pollEvery(b, 30*time.Second, 5*time.Millisecond, func() error {
			p := &corev1.Pod{}
			if err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name(i)}, p); err != nil {
				return err
			}
			if !strings.Contains(p.Annotations[wellknown.AnnotationSlurmState], "drain") {
				return fmt.Errorf("%s: %q", name(i), p.Annotations[wellknown.AnnotationSlurmState])
			}
			return nil
		})
		toKube = append(toKube, time.Since(t))
	}
	b.ReportMetric(testenv.PercentileMS(toSlurm, 50), "k8s->slurm-p50-ms")
	b.ReportMetric(testenv.PercentileMS(toSlurm, 99), "k8s->slurm-p99-ms")
	b.ReportMetric(testenv.PercentileMS(toKube, 50), "slurm->k8s-p50-ms")
	b.ReportMetric(testenv.PercentileMS(toKube, 99), "slurm->k8s-p99-ms")

	// 100 nodes drained in Slurm at once (one update), until all 100 pods are annotated.
	// Odd indices: none of the samples' (all even) is among them.
	var hundred []string
	for j := range 100 {
		hundred = append(hundred, name(j*(n/100)+1))
	}
	t100 := time.Now()
	reason := "bench drain 100"
	if err := direct.UpdateNode(ctx, strings.Join(hundred, ","), slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err != nil {
		b.Fatal(err)
	}
	left := slices.Clone(hundred)
	pollEvery(b, time.Minute, 20*time.Millisecond, func() error {
		var still []string
		for _, nm := range left {
			p := &corev1.Pod{}
			if err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: nm}, p); err != nil {
				return err
			}
			if !strings.Contains(p.Annotations[wellknown.AnnotationSlurmState], "drain") {
				still = append(still, nm)
			}
		}
		left = still
		if len(left) > 0 {
			return fmt.Errorf("%d of 100 pods not annotated drained", len(left))
		}
		return nil
	})
	drain100 := time.Since(t100)
	b.ReportMetric(float64(drain100.Milliseconds()), "drain100-ms")
	fmt.Printf("bench: path=%s nodes=%d k8s_to_slurm_p99_ms=%.0f slurm_to_k8s_p99_ms=%.0f slurm_to_k8s_p50_ms=%.0f steady_bytes_per_s=%.0f steady_req_per_s=%.1f drain100_all_annotated_ms=%d first_sync_s=%.0f"+
		" steady_ctld_rpc_per_s=%.1f steady_node_info_rpc_per_s=%.1f watcher_cpu_s_per_min=%.2f syncer_cpu_pct=%.1f\n",
		path, n, testenv.PercentileMS(toSlurm, 99), testenv.PercentileMS(toKube, 99), testenv.PercentileMS(toKube, 50), steadyBytes, steadyReqs, drain100.Milliseconds(), firstSync,
		ctldRPC, nodeInfoRPC, watcherCPUPerMin, syncerCPU)
}

// jitter spreads the samples over the poll period: a change made right after the previous
// sample's detection would always land just after a poll, the worst case.
func jitter() { time.Sleep(time.Duration(rand.Int64N(int64(time.Second)))) }

type benchHarness struct {
	cfg *rest.Config
	c   client.Client
	sl  slurm.Client
}

func newBenchHarness(b *testing.B, env *testenv.SlurmEnv, cfg *rest.Config) *benchHarness {
	c, sl := clients(b, env, cfg)
	return &benchHarness{cfg: cfg, c: c, sl: sl}
}

func (h *benchHarness) run(b *testing.B, c syncer.Config) {
	kc, err := cache.New(h.cfg, cache.Options{Scheme: h.c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if err := syncer.IndexPodsByNode(ctx, kc); err != nil {
		b.Fatal(err)
	}
	s := syncer.New(c, h.c, kc, h.c)
	go func() { _ = kc.Start(ctx) }()
	if !kc.WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	go func() { _ = s.Run(ctx) }()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countingTransport struct {
	next              http.RoundTripper
	reqs, bytes, full *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.reqs.Add(1)
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		// Full node lists only: the job mirror's GET /jobs/state (every 2 s) is a 200 too,
		// and counts in rest-req/s and rest-B/s.
		if resp.StatusCode == http.StatusOK && strings.Contains(r.URL.Path, "/nodes") {
			t.full.Add(1)
		}
		resp.Body = testenv.CountingBody{ReadCloser: resp.Body, N: t.bytes}
	}
	return resp, err
}
