package syncer

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// PodNodeIndex is the field index of compute pods by spec.nodeName that a Syncer needs on
// its cache (IndexPodsByNode), so that a node's change reaches the pods on it without a scan.
const PodNodeIndex = "spec.nodeName"

// IndexPodsByNode registers PodNodeIndex; call it once per cache, before the cache starts.
func IndexPodsByNode(ctx context.Context, idx client.FieldIndexer) error {
	return idx.IndexField(ctx, &corev1.Pod{}, PodNodeIndex, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	})
}

// DefaultPollInterval is Config.PollInterval's default.
const DefaultPollInterval = 500 * time.Millisecond

// DefaultWorkers is Config.Workers' default. A sync spends its time waiting on the API server
// (each write is an etcd commit) and slurmrestd, not on CPU: with 8 workers the mirror of 40
// nodes changed in one poll queued for up to 1.5 s behind itself on the 2-core test bed.
const DefaultWorkers = 32

// Config describes one Slurm cluster and its compute pods.
type Config struct {
	// Namespace and Cluster select the compute pods: labels sunk.dev/cluster=Cluster and
	// sunk.dev/component=compute in Namespace. A pod's name is its Slurm node's name.
	Namespace, Cluster string
	// Slurm reads and changes the cluster's nodes.
	Slurm slurm.Client
	// NodeChanges, when set, feeds the Slurm node cache instead of polling slurmrestd: the node
	// watcher beside slurmctld (pkg/nodewatch), whose answers cost what changed. Writes still
	// go through Slurm. Nil: the cache polls slurmrestd's node list (the default).
	NodeChanges slurm.NodeChangeSource
	// PollInterval of the Slurm node cache (default 500ms: a change in Slurm reaches
	// Kubernetes within one poll plus one list, under a second at 5,000 nodes; an unchanged
	// cluster answers each poll with a small 304).
	PollInterval time.Duration
	// StaleAfter: Slurm's state counts as unreadable when no poll succeeded for this long
	// (default 3 polls + 15s: longer than a slow list may take, since a busy slurmctld is
	// slow, not unreadable; a failed poll counts at once). While it is, the syncer changes
	// nothing. Every write is decided again on a fresh read of its node, so a cache a few
	// polls old delays changes but never makes a wrong one.
	StaleAfter time.Duration
	// Owns says whether a Slurm node record belongs to a compute pod of this cluster, and
	// so is removed when no such pod exists. Default: a dynamic node named and featured the
	// way a NodeSet's compute pod registers (clusternames.RegisteredByNodeSet); other dynamic nodes
	// (registered by a person or another tool) are left alone.
	Owns func(*slurm.Node) bool
	// OrphanGrace: a record is removed only once its pod has been missing this long
	// (default 30s), so that a pod the cache has not shown yet keeps its node.
	OrphanGrace time.Duration
	// NotReadyGrace: a compute pod that was Ready and is not becomes the drain cause "pod
	// not Ready" once it has not been Ready for this long (default DefaultNotReadyGrace);
	// see PodNotReady.
	NotReadyGrace time.Duration
	// DrainBudgetPercent: one budgeted cause ("node NotReady", "pod not Ready") may hold at
	// most this share of the cluster's Slurm nodes drained at once, at least one node
	// (default DefaultDrainBudgetPercent; 100 lifts the limit). See HeldBy.
	DrainBudgetPercent int
	// JobPollInterval of the job cache behind the pods' job mirror (default
	// DefaultJobPollInterval).
	JobPollInterval time.Duration
	// Resync enqueues every pod, node and record this often, a safety net (default 5m).
	Resync time.Duration
	// Workers that sync keys in parallel (default DefaultWorkers).
	Workers int
	// Metrics (nil: none). Recorder for events on pods (nil: none).
	Metrics  *Metrics
	Recorder events.EventRecorder
	// OnHealth is called whenever the readability of Slurm's state changes (and once at
	// start), e.g. to set a condition. err is nil when readable.
	OnHealth func(ctx context.Context, err error)
}

// Syncer keeps one Slurm cluster's nodes and its compute pods and their Kubernetes nodes in
// agreement. Kubernetes changes arrive from the shared informers, Slurm changes from the
// polling node cache; both enqueue the Slurm node's name, and a worker brings that one node
// to the state both worlds call for (sync).
type Syncer struct {
	cfg    Config
	client client.Client // writes
	cache  cache.Cache   // reads of pods and nodes
	live   client.Reader // the one read that must not lag: is a pod really gone?
	nodes  *slurm.Informer[string, slurm.Node]
	jobs   *slurm.Informer[uint32, slurm.Job]
	onNode *jobIndex // the running jobs per Slurm node, from jobs
	queue  workqueue.TypedRateLimitingInterface[string]
	writer *writer
	budget *budget

	mu       sync.Mutex
	seen     map[string]observed  // key -> when a change was first observed, per direction
	inflight map[string]inflight  // Slurm node -> the last change sent, until the cache shows it
	orphans  map[string]time.Time // Slurm node -> when its pod was first seen missing
	deferred map[string]struct{}  // keys skipped while Slurm was unreadable
	healthy  *bool
}

type observed struct{ k8s, slurm time.Time }

// inflight is a change sent to Slurm that the node cache may not show yet.
type inflight struct {
	action Action
	at     time.Time
	before string // the cached Slurm node (state and reason) it was decided on
}

func snapshot(n *slurm.Node) string { return fmt.Sprint(n.State, n.Reason) }

// nodeKeyPrefix marks queue keys that name a Kubernetes node rather than a Slurm node.
const nodeKeyPrefix = "node/"

// New returns a Syncer; c writes, kc is the (started or to-be-started) cache with
// IndexPodsByNode registered, live reads past the cache.
func New(cfg Config, c client.Client, kc cache.Cache, live client.Reader) *Syncer {
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = 3*cfg.PollInterval + 15*time.Second
	}
	if cfg.Owns == nil {
		cfg.Owns = func(n *slurm.Node) bool {
			return n.HasState("DYNAMIC_NORM") && clusternames.RegisteredByNodeSet(n.Name, n.Features)
		}
	}
	if cfg.OrphanGrace == 0 {
		cfg.OrphanGrace = 30 * time.Second
	}
	if cfg.NotReadyGrace == 0 {
		cfg.NotReadyGrace = DefaultNotReadyGrace
	}
	if cfg.DrainBudgetPercent <= 0 {
		cfg.DrainBudgetPercent = DefaultDrainBudgetPercent
	}
	if cfg.JobPollInterval == 0 {
		cfg.JobPollInterval = DefaultJobPollInterval
	}
	if cfg.Resync == 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	nodes := slurm.NewNodeInformer(cfg.Slurm, slurm.InformerOptions{Interval: cfg.PollInterval})
	if cfg.NodeChanges != nil {
		nodes = slurm.NewNodeChangeInformer(cfg.NodeChanges, slurm.InformerOptions{Interval: cfg.PollInterval})
	}
	s := &Syncer{
		cfg: cfg, client: c, cache: kc, live: live,
		nodes:  nodes,
		jobs:   slurm.NewJobInformer(cfg.Slurm, slurm.InformerOptions{Interval: cfg.JobPollInterval}),
		onNode: newJobIndex(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sunk-syncer-" + cfg.Namespace + "-" + cfg.Cluster}),
		seen: map[string]observed{}, inflight: map[string]inflight{}, orphans: map[string]time.Time{},
		deferred: map[string]struct{}{},
		budget:   newBudget(cfg.Owns, cfg.DrainBudgetPercent, resendAfter(cfg.PollInterval)),
	}
	s.writer = newWriter(cfg.Slurm, func() int { return s.nodes.Len() })
	return s
}

// Run syncs until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	defer s.queue.ShutDown()
	s.cfg.Metrics.begin(s.cfg.Namespace, s.cfg.Cluster)
	podInf, err := s.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	nodeInf, err := s.cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return err
	}
	podReg, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.podEvent(o) },
		UpdateFunc: func(_, o any) { s.podEvent(o) },
		DeleteFunc: func(o any) { s.podEvent(o) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = podInf.RemoveEventHandler(podReg) }()
	nodeReg, err := nodeInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.nodeEvent(ctx, o) },
		UpdateFunc: func(_, o any) { s.nodeEvent(ctx, o) },
		DeleteFunc: func(o any) { s.nodeEvent(ctx, o) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = nodeInf.RemoveEventHandler(nodeReg) }()
	onSlurm := func(n slurm.Node, gone bool) {
		s.enqueue(n.Name, false)
		if s.budget.observe(&n, gone) {
			// The drain budget has room again: the drains it held back are due.
			for _, held := range s.budget.heldNodes() {
				s.queue.Add(held)
			}
		}
	}
	s.nodes.AddHandler(slurm.Handler[slurm.Node]{
		OnAdd:    func(n slurm.Node) { onSlurm(n, false) },
		OnUpdate: func(_, n slurm.Node) { onSlurm(n, false) },
		OnDelete: func(n slurm.Node) { onSlurm(n, true) },
	})
	go func() { _ = s.nodes.Run(ctx) }()
	// Job changes only rewrite the job mirror: queued without the latency metric's stamps.
	onJob := func(j slurm.Job, gone bool) {
		for _, n := range s.onNode.observe(j, gone) {
			s.queue.Add(n)
		}
	}
	s.jobs.AddHandler(slurm.Handler[slurm.Job]{
		OnAdd:    func(j slurm.Job) { onJob(j, false) },
		OnUpdate: func(_, j slurm.Job) { onJob(j, false) },
		OnDelete: func(j slurm.Job) { onJob(j, true) },
	})
	go func() { _ = s.jobs.Run(ctx) }()
	go s.writer.run(ctx)
	for range s.cfg.Workers {
		go func() {
			for s.next(ctx) {
			}
		}()
	}
	return s.watchHealth(ctx)
}

// sync brings one Slurm node, its compute pod and that pod's Kubernetes node into agreement.
// Nothing changes while Slurm's state is unreadable (fail closed): a stale or missing answer
// must never read as "not drained" or "no such node".
func (s *Syncer) sync(ctx context.Context, name string) error {
	if s.slurmUnreadable() != nil {
		s.deferKey(name)
		return nil
	}
	s.mu.Lock()
	seen := s.seen[name]
	delete(s.seen, name)
	s.mu.Unlock()

	pod := &corev1.Pod{}
	if err := s.cache.Get(ctx, types.NamespacedName{Namespace: s.cfg.Namespace, Name: name}, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return err
	} else if !s.ours(pod) {
		pod = nil
	}
	sn, registered := s.nodes.Get(name)
	if pod == nil {
		s.budget.forget(name)
		// A parked record (the NodeSet autoscaler's, in state FUTURE) has no pod by design.
		if registered && s.cfg.Owns(&sn) && !wellknown.Parked(sn.BaseState(), sn.Comment) {
			return s.removeOrphan(ctx, &sn)
		}
		s.forgetOrphan(name)
		return nil
	}
	s.forgetOrphan(name)

	var node *corev1.Node
	if pod.Spec.NodeName != "" {
		node = &corev1.Node{}
		if err := s.cache.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); apierrors.IsNotFound(err) {
			node = nil
		} else if err != nil {
			return err
		}
	}
	var slurmNode *slurm.Node
	if registered {
		slurmNode = &sn
		if err := s.toSlurm(ctx, pod, node, slurmNode, seen.k8s); err != nil {
			return err
		}
	}
	return s.toKube(ctx, pod, node, slurmNode, seen.slurm)
}

func (s *Syncer) kubeError(err error) error {
	if apierrors.IsNotFound(err) {
		return nil // gone meanwhile; its delete event brings the next step
	}
	s.cfg.Metrics.syncError(s.cfg.Namespace, s.cfg.Cluster, errKubeWrite)
	return err
}

func (s *Syncer) event(pod *corev1.Pod, typ, reason, action, format string, args ...any) {
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.Eventf(pod, nil, typ, reason, action, format, args...)
	}
}

// resendAfter is how long a change sent to Slurm is trusted to show in the node cache before
// it is decided afresh (and sent again if still due): three polls and some slack.
func resendAfter(poll time.Duration) time.Duration { return 3*poll + 2*time.Second }
