//go:build integration

package operator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/cmdutil"
	"sunk.dev/sunk/internal/controller/nodeset"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// BenchmarkOperator runs the operator's NodeSet controller, with its production intervals, on
// a NodeSet of N members (Replicas mode) against envtest's kube-apiserver and the real Slurm
// of the test bed, without node watchers (path=rest: the SlurmCluster's
// spec.controller.nodeWatcher off) and with them (path=watcher: sunk-nodewatch on the bed's
// slurmctld), each also with the NodeSet autoscaled (path=rest-autoscaled, watcher-autoscaled:
// spec.autoscaling with minReplicas and maxReplicas N, so that the autoscaler runs at every
// reconcile, every 5 s, reading Slurm's nodes and jobs, and keeps every member: the FUTURE
// records never register, and would otherwise go after idleAfter). There is no kubelet and no slurmd: the benchmark plays both (benchKubelet): it
// binds each compute pod, reports it Running and Ready, and creates its Slurm record as a
// FUTURE node (`scontrol create ... state=future`, as BenchmarkSyncer makes its records, with
// the NodeSet's feature, as its slurmd would register it, so that the autoscaler counts it);
// it confirms a pod's deletion as kubelet does once the containers stopped (grace period 0).
// It reports one line:
//
//		bench: name=operator-nodeset path=P nodes=N create_s=... settled_s=... reconcile_p50_ms=... ...
//
//	  - create_s: NodeSet created until every member's pod is Ready and its Slurm record exists;
//	    settled_s: until the NodeSet's status says Ready=True with N ready;
//	  - one-pod change, SUNK_BENCH_SAMPLES times (default 20): one pod deleted (as `kubectl
//	    delete pod`) until its replacement is Ready with a new Slurm record (change_p50/p99_ms),
//	    and the NodeSet reconciles meanwhile (reconcile_p50/p99_ms: interpolated in
//	    controller-runtime's reconcile time histogram, whose buckets are 5 ms to 60 s wide;
//	    reconciles_per_change);
//	  - steady state over SUNK_BENCH_STEADY (default 2m): reconciles, slurmrestd calls (pkg/slurm's
//	    request metrics), the bytes of their answers and the node lists among them, per minute;
//	  - heap_mb: the Go heap in use at the end of the steady state (the whole process: the
//	    operator, its caches and the benchmark's metadata-only pod cache), heap_growth_mb: less
//	    the heap before the NodeSet was created.
//
// Every Slurm record the benchmark made is deleted at the end. SUNK_BENCH_NODES sets N
// (default 5000; the test bed's slurm.conf holds 6000 records), SUNK_BENCH_PATHS the paths
// (default rest,watcher,rest-autoscaled,watcher-autoscaled).
//
// Run: make bench-operator, or
// go test -tags integration -run '^$' -bench Operator -benchtime 1x -timeout 60m ./test/integration/operator/
func BenchmarkOperator(b *testing.B) {
	n := testenv.BenchInt(b, "SUNK_BENCH_NODES", 5000, 10, 5900)
	samples := testenv.BenchInt(b, "SUNK_BENCH_SAMPLES", 20, 1, 1000)
	steady := 2 * time.Minute
	if v := os.Getenv("SUNK_BENCH_STEADY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			b.Fatalf("SUNK_BENCH_STEADY: %q is not a duration of 10s or more", v)
		}
		steady = d
	}
	paths := []string{"rest", "watcher", "rest-autoscaled", "watcher-autoscaled"}
	if v := os.Getenv("SUNK_BENCH_PATHS"); v != "" {
		paths = strings.Split(v, ",")
	}
	for _, path := range paths {
		if base, _ := strings.CutSuffix(path, "-autoscaled"); base != "rest" && base != "watcher" {
			b.Fatalf("SUNK_BENCH_PATHS: %q is none of rest, watcher, rest-autoscaled, watcher-autoscaled", path)
		}
		b.Run("nodes="+strconv.Itoa(n)+"/path="+path, func(b *testing.B) {
			for b.Loop() {
				benchOperator(b, n, samples, steady, path)
			}
		})
	}
}

const (
	benchNodeSet  = "opb" // member names opb-0 ... : no other test's Slurm records
	benchCluster  = "bench"
	benchKubeNode = "bench-node"
)

// settleWithin bounds the wait for a NodeSet of SUNK_BENCH_NODES members to say Ready.
var settleWithin = 10 * time.Minute

func benchOperator(b *testing.B, n, samples int, steady time.Duration, path string) {
	ctrl.SetLogger(logr.Discard())
	base, autoscaled := strings.CutSuffix(path, "-autoscaled")
	watcher := base == "watcher"
	env := testenv.Slurm(b)
	api := testenv.APIEnv(b, testenv.APIOptions{CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")}})
	cfg := api.Config
	cfg.QPS, cfg.Burst = 5000, 5000 // the controller's and the benchmark's work, not client-side throttling
	scheme := cmdutil.Scheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	const ns = "slurm"
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cleanupRecords(b, env)

	// The cluster as the NodeSet controller reads it: the SlurmCluster, its JWT Secret (the
	// bed's key) and its REST Service. No SlurmCluster controller: it would reconfigure the
	// shared bed's slurmctld.
	sc := newCluster(ns, benchCluster)
	sc.Spec.Prolog = nil
	sc.Spec.Controller.NodeWatcher = watcher
	// The bed's slurmrestd and the benchmark's node watcher speak plain HTTP: with spec.tls on
	// (the default) the pool wants the cluster's CA and makes no client without it.
	sc.Spec.TLS.Enabled = ptr.To(false)
	must(b, c.Create(ctx, sc))
	names := clusternames.For(sc, "")
	// Replicas mode places pods anywhere, on Kubernetes nodes that exist.
	must(b, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchKubeNode}}))
	// The node watchers' Service: its address is that of the benchmark's own watcher (watcherAt).
	must(b, c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.NodeWatch},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: clusternames.NodeWatchPort}}}}))
	watcherIP := &atomic.Value{}
	if watcher {
		watcherIP.Store(bedNodeWatcher(b, env))
	}
	must(b, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.JWTSecret},
		Data: map[string][]byte{wellknown.SecretJWTKey: env.JWTKey(b)}}))
	must(b, c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.RestAPI},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: clusternames.SlurmrestdPort}}}}))

	// The operator's slurmrestd traffic: calls from pkg/slurm's metrics, bytes from the answers.
	reg := prometheus.NewRegistry()
	sm, err := slurm.NewMetrics(reg)
	must(b, err)
	var answerBytes atomic.Int64
	pool := slurmconn.New(slurmconn.Options{Reader: watcherAt{Reader: c, service: names.NodeWatch, ip: watcherIP}, Metrics: sm,
		Factory: func(_ string, keys slurmconn.Keys, hc *http.Client) (slurm.Client, error) {
			tokens, err := slurm.NewJWTSource(env.User, keys.Current, slurm.WithFallbackKey(keys.Previous))
			if err != nil {
				return nil, err
			}
			counted := &http.Client{Timeout: hc.Timeout, Transport: bytesCounter{hc.Transport, &answerBytes}}
			return slurm.NewDiscovering(slurm.Config{URL: env.RESTURL, Tokens: tokens, HTTPClient: counted, Metrics: sm, Cluster: benchCluster})
		}})

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Cache:      cmdutil.OperatorCacheOptions(nil),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(b, err)
	// The production intervals: 5 s while waiting on Slurm, 60 s resync when settled.
	must(b, (&nodeset.Reconciler{Client: mgr.GetClient(), Scheme: scheme, Slurm: pool}).SetupWithManager(mgr))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("manager: %v", err)
		}
	})
	k := startBenchKubelet(b, ctx, cfg, c, env, ns)
	b.Cleanup(func() { cleanupRecords(b, env) })

	runtime.GC()
	heap0 := heapInUse()

	// Creation.
	t0 := time.Now()
	set := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: benchNodeSet},
		Spec: sunkv1.NodeSetSpec{ClusterRef: benchCluster, Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(n))}}
	if autoscaled {
		set.Spec.Autoscaling = &sunkv1.NodeSetAutoscaling{MinReplicas: int32(n), MaxReplicas: int32(n)}
	}
	must(b, c.Create(ctx, set))
	wait.For(b, "every member Ready with its Slurm record", 30*time.Minute, time.Second, func() error {
		if r, rec := k.ready.Load(), k.records.Load(); r < int64(n) || rec < int64(n) {
			return fmt.Errorf("%d pods Ready, %d records of %d", r, rec, n)
		}
		return nil
	})
	createS := time.Since(t0).Seconds()
	waitSettled(b, c, ns, n, settleWithin)
	settledS := time.Since(t0).Seconds()
	b.Logf("created in %.1f s, settled in %.1f s", createS, settledS)

	// Steady state: nothing changes on either side.
	runtime.GC()
	calls0, lists0, rec0 := restCalls(b, reg), restNodeLists(b, reg), reconcileCount(b)
	bytes0 := answerBytes.Load()
	t1 := time.Now()
	time.Sleep(steady) // the measurement window itself, not a synchronisation
	minutes := time.Since(t1).Minutes()
	callsPerMin := (restCalls(b, reg) - calls0) / minutes
	listsPerMin := (restNodeLists(b, reg) - lists0) / minutes
	reconcilesPerMin := (reconcileCount(b) - rec0) / minutes
	bytesPerMin := float64(answerBytes.Load()-bytes0) / minutes
	runtime.GC()
	heap := heapInUse()

	// One-pod changes: a pod deleted, until its replacement is Ready with a new record.
	var changes []time.Duration
	hist0 := reconcileHistogram(b)
	rec1 := reconcileCount(b)
	for s := range samples {
		name := clusternames.OrdinalMemberName(benchNodeSet, (s*n/samples+s)%n)
		old := &corev1.Pod{}
		must(b, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, old))
		made := k.recordsOf(name)
		t := time.Now()
		must(b, c.Delete(ctx, old))
		wait.For(b, "the replacement of "+name, 5*time.Minute, 20*time.Millisecond, func() error {
			p := &corev1.Pod{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
				return err
			}
			if p.UID == old.UID || !podReady(p) || k.recordsOf(name) == made {
				return fmt.Errorf("%s not replaced yet", name)
			}
			return nil
		})
		changes = append(changes, time.Since(t))
		waitSettled(b, c, ns, n, 5*time.Minute)
	}
	recP50, recP99 := histogramQuantiles(hist0, reconcileHistogram(b))
	perChange := (reconcileCount(b) - rec1) / float64(samples)

	fmt.Printf("bench: name=operator-nodeset path=%s nodes=%d create_s=%.1f settled_s=%.1f change_p50_ms=%.0f change_p99_ms=%.0f"+
		" reconcile_p50_ms=%.0f reconcile_p99_ms=%.0f reconciles_per_change=%.1f steady_reconciles_per_min=%.1f"+
		" steady_rest_calls_per_min=%.1f steady_node_lists_per_min=%.1f steady_rest_bytes_per_min=%.0f heap_mb=%.1f heap_growth_mb=%.1f\n",
		path, n, createS, settledS, testenv.PercentileMS(changes, 50), testenv.PercentileMS(changes, 99), recP50*1000, recP99*1000, perChange, reconcilesPerMin,
		callsPerMin, listsPerMin, bytesPerMin, float64(heap)/(1<<20), float64(heap-heap0)/(1<<20))
}

// waitSettled waits until the NodeSet's status says what the operator saw: n Ready members and
// Ready=True.
func waitSettled(b *testing.B, c client.Client, ns string, n int, within time.Duration) {
	b.Helper()
	wait.For(b, "the NodeSet Ready", within, 200*time.Millisecond, func() error {
		set := &sunkv1.NodeSet{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: benchNodeSet}, set); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(set.Status.Conditions, sunkv1.ConditionReady)
		if set.Status.Ready != int32(n) || cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != set.Generation {
			return fmt.Errorf("ready %d of %d, condition %v", set.Status.Ready, n, cond)
		}
		return nil
	})
}

// benchKubelet plays kubelet and slurmd for the NodeSet's pods: it binds a new pod to a node
// (the node's name does not matter: nothing runs there), reports it Running and Ready, creates
// its Slurm record, and confirms a deletion at once, as kubelet does once the containers
// stopped. It watches pods as metadata only, so that its cache adds little to the heap the
// benchmark reports.
type benchKubelet struct {
	c   client.Client
	env *testenv.SlurmEnv
	ns  string

	work  chan string // pods to bind and report Ready
	names chan string // records to create

	ready, records atomic.Int64
	mu             sync.Mutex
	seen           map[types.UID]bool // pods taken care of
	made           map[string]int     // records created per member name
}

func startBenchKubelet(b *testing.B, ctx context.Context, cfg *rest.Config, c client.Client, env *testenv.SlurmEnv, ns string) *benchKubelet {
	k := &benchKubelet{c: c, env: env, ns: ns, work: make(chan string, 100000), names: make(chan string, 100000),
		seen: map[types.UID]bool{}, made: map[string]int{}}
	kc, err := cache.New(cfg, cache.Options{Scheme: c.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	must(b, err)
	pods := &metav1.PartialObjectMetadata{}
	pods.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	inf, err := kc.GetInformer(ctx, pods)
	must(b, err)
	on := func(obj any) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok || m.Labels[wellknown.LabelNodeSet] != benchNodeSet {
			return
		}
		if !m.DeletionTimestamp.IsZero() {
			if m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds != 0 {
				// The containers stopped: kubelet's final deletion.
				_ = c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID}},
					client.GracePeriodSeconds(0), client.Preconditions{UID: &m.UID})
			}
			return
		}
		k.mu.Lock()
		fresh := !k.seen[m.UID]
		k.seen[m.UID] = true
		k.mu.Unlock()
		if fresh {
			k.work <- m.Name
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }})
	must(b, err)
	go func() { _ = kc.Start(ctx) }()
	if !kc.WaitForCacheSync(ctx) {
		b.Fatal("the benchmark's pod cache did not sync")
	}
	for range 16 {
		go k.runPods(ctx)
	}
	go k.runRecords(ctx)
	return k
}

func (k *benchKubelet) runPods(ctx context.Context) {
	for {
		var name string
		select {
		case <-ctx.Done():
			return
		case name = <-k.work:
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name}}
		bind := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name},
			Target: corev1.ObjectReference{Kind: "Node", Name: benchKubeNode}}
		if err := k.c.SubResource("binding").Create(ctx, pod, bind); err != nil {
			continue // deleted meanwhile, or bound already
		}
		status := []byte(`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
		if err := k.c.Status().Patch(ctx, pod, client.RawPatch(types.MergePatchType, status)); err != nil {
			continue
		}
		k.ready.Add(1)
		k.names <- name
	}
}

// runRecords registers the Ready pods' Slurm nodes, many in one scontrol call while pods come
// in a burst (slurmd registers each by itself; this machine cannot run thousands).
func (k *benchKubelet) runRecords(ctx context.Context) {
	for {
		var batch []string
		select {
		case <-ctx.Done():
			return
		case name := <-k.names:
			batch = append(batch, name)
		}
		for len(batch) < 500 {
			select {
			case name := <-k.names:
				batch = append(batch, name)
				continue
			case <-time.After(50 * time.Millisecond):
			}
			break
		}
		create := func(names []string) error {
			out, err := k.env.Exec("scontrol", "create", "nodename="+strings.Join(names, ","), "state=future", "cpus=1", "realmemory=100",
				"features="+benchNodeSet)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
		var made []string
		if err := create(batch); err == nil {
			made = batch
		} else {
			for _, name := range batch { // one by one: one of them may exist already
				if err := create([]string{name}); err == nil {
					made = append(made, name)
				}
			}
		}
		k.mu.Lock()
		for _, name := range made {
			k.made[name]++
		}
		k.mu.Unlock()
		k.records.Add(int64(len(made)))
	}
}

func (k *benchKubelet) recordsOf(name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.made[name]
}

// cleanupRecords deletes the Slurm records of the benchmark's members, found in one list.
func cleanupRecords(b *testing.B, env *testenv.SlurmEnv) {
	sl, err := slurm.NewDiscovering(slurm.Config{URL: env.RESTURL, Tokens: env.Tokens(b)})
	must(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := sl.ListNodes(ctx, time.Time{})
	if err != nil {
		b.Errorf("cleanup: listing Slurm nodes: %v", err)
		return
	}
	var ours []string
	for _, nd := range l.Nodes {
		if _, ok := clusternames.MemberOrdinal(benchNodeSet, nd.Name); ok {
			ours = append(ours, nd.Name)
		}
	}
	for chunk := range slices.Chunk(ours, 500) {
		if out, err := env.Exec("scontrol", "delete", "nodename="+strings.Join(chunk, ",")); err != nil {
			b.Errorf("cleanup: deleting %d Slurm records: %v: %s", len(chunk), err, out)
		}
	}
}

// bedNodeWatcher runs sunk-nodewatch on the test bed's slurmctld, as in a slurmctld pod (its
// reader every 200 ms; tokens of the bed's JWT key naming SlurmUser, as the operator mints
// them), in a process of its own so that its table does not count in the benchmark's heap,
// listening on clusternames.NodeWatchPort of a loopback address of its own, which it returns.
func bedNodeWatcher(b *testing.B, env *testenv.SlurmEnv) string {
	b.Helper()
	var ip string
	for range 20 {
		ip = fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
		if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(clusternames.NodeWatchPort))); err == nil {
			_ = l.Close()
			break
		}
	}
	env.NodeWatcherProcess(b, net.JoinHostPort(ip, strconv.Itoa(clusternames.NodeWatchPort)), wellknown.SlurmUser, 200*time.Millisecond)
	return ip
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// bytesCounter counts the bytes of slurmrestd's answers.
type bytesCounter struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t bytesCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		resp.Body = testenv.CountingBody{ReadCloser: resp.Body, N: t.n}
	}
	return resp, err
}

// restCalls is every slurmrestd request pkg/slurm's metrics counted; restNodeLists those of the
// whole node list (GET /nodes/, with or without update_time).
func restCalls(b *testing.B, g prometheus.Gatherer) float64 {
	return sumCounter(b, g, "sunk_slurm_rest_requests_total", func(*dto.Metric) bool { return true })
}

func restNodeLists(b *testing.B, g prometheus.Gatherer) float64 {
	return sumCounter(b, g, "sunk_slurm_rest_requests_total", func(m *dto.Metric) bool {
		return labelOf(m, "endpoint") == "GET /nodes/"
	})
}

// reconcileCount is the NodeSet controller's reconciles so far.
func reconcileCount(b *testing.B) float64 {
	return sumCounter(b, ctrlmetrics.Registry, "controller_runtime_reconcile_total", func(m *dto.Metric) bool {
		return labelOf(m, "controller") == "nodeset"
	})
}

func sumCounter(b *testing.B, g prometheus.Gatherer, name string, keep func(*dto.Metric) bool) float64 {
	mfs, err := g.Gather()
	must(b, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if keep(m) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// reconcileHistogram is the NodeSet controller's reconcile time histogram: cumulative counts
// by upper bound.
func reconcileHistogram(b *testing.B) map[float64]uint64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	must(b, err)
	out := map[float64]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelOf(m, "controller") != "nodeset" {
				continue
			}
			for _, bk := range m.GetHistogram().GetBucket() {
				out[bk.GetUpperBound()] += bk.GetCumulativeCount()
			}
			out[math.Inf(1)] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// histogramQuantiles are the median and 99th percentile of the observations between two
// snapshots, interpolated linearly within a bucket as Prometheus' histogram_quantile does.
func histogramQuantiles(before, after map[float64]uint64) (p50, p99 float64) {
	var bounds []float64
	for ub := range after {
		bounds = append(bounds, ub)
	}
	slices.Sort(bounds)
	total := float64(after[math.Inf(1)] - before[math.Inf(1)])
	q := func(p float64) float64 {
		if total == 0 {
			return math.NaN()
		}
		rank, lower, prev := p*total, 0.0, 0.0
		for _, ub := range bounds {
			cum := float64(after[ub] - before[ub])
			if cum >= rank {
				if math.IsInf(ub, 1) {
					return lower
				}
				return lower + (ub-lower)*(rank-prev)/max(cum-prev, 1)
			}
			lower, prev = ub, cum
		}
		return lower
	}
	return q(0.5), q(0.99)
}
