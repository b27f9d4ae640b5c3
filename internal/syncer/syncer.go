package syncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// ReasonDrainHeld is the reason of the Warning event on a compute pod whose drain the drain
// budget holds back.
const ReasonDrainHeld = "SlurmDrainHeld"

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

// Config describes one Slurm cluster and its compute pods.
type Config struct {
	// Namespace and Cluster select the compute pods: labels sunk.dev/cluster=Cluster and
	// sunk.dev/component=compute in Namespace. A pod's name is its Slurm node's name.
	Namespace, Cluster string
	// Slurm reads and changes the cluster's nodes.
	Slurm slurm.Client
	// PollInterval of the Slurm node cache (default 500ms: a change in Slurm reaches
	// Kubernetes within one poll plus one list, under a second at 5,000 nodes; an unchanged
	// cluster answers each poll with a small 304).
	PollInterval time.Duration
	// StaleAfter: Slurm's state counts as unreadable when no poll succeeded for this long
	// (default 3 polls + 2s). While it is, the syncer changes nothing.
	StaleAfter time.Duration
	// Owns says whether a Slurm node record belongs to a compute pod of this cluster, and
	// so is removed when no such pod exists. Default: every dynamic node (in a sunk cluster
	// only compute pods register dynamic nodes).
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
	// Resync enqueues every pod, node and record this often, a safety net (default 5m).
	Resync time.Duration
	// Workers that sync keys in parallel (default 8).
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
	queue  workqueue.TypedRateLimitingInterface[string]
	budget *budget

	mu       sync.Mutex
	seen     map[string]observed  // key -> when a change was first observed, per direction
	inflight map[string]inflight  // Slurm node -> the last change sent, until the cache shows it
	orphans  map[string]time.Time // Slurm node -> when its pod was first seen missing
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
		cfg.StaleAfter = 3*cfg.PollInterval + 2*time.Second
	}
	if cfg.Owns == nil {
		cfg.Owns = func(n *slurm.Node) bool { return n.HasState("DYNAMIC_NORM") }
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
	if cfg.Resync == 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	return &Syncer{
		cfg: cfg, client: c, cache: kc, live: live,
		nodes: slurm.NewNodeInformer(cfg.Slurm, slurm.InformerOptions{Interval: cfg.PollInterval}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sunk-syncer-" + cfg.Namespace + "-" + cfg.Cluster}),
		seen: map[string]observed{}, inflight: map[string]inflight{}, orphans: map[string]time.Time{},
		budget: newBudget(cfg.Owns, cfg.DrainBudgetPercent, cfg.StaleAfter),
	}
}

// Run syncs until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	defer s.queue.ShutDown()
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
	for range s.cfg.Workers {
		go func() {
			for s.next(ctx) {
			}
		}()
	}
	return s.watchHealth(ctx)
}

// watchHealth reports Slurm's readability as it changes, re-enqueues everything when it
// returns (changes skipped while failing closed are due now) and on the resync period.
func (s *Syncer) watchHealth(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	lastResync := time.Now()
	for {
		err := s.slurmUnreadable()
		ok := err == nil
		s.mu.Lock()
		changed := s.healthy == nil || *s.healthy != ok
		s.healthy = &ok
		s.mu.Unlock()
		if changed {
			s.cfg.Metrics.setReadable(s.cfg.Namespace, s.cfg.Cluster, ok)
			if ok {
				log.FromContext(ctx).Info("Slurm node state readable", "cluster", s.cfg.Cluster)
				s.resyncAll(ctx)
				lastResync = time.Now()
			} else {
				log.FromContext(ctx).Info("Slurm node state unreadable: changing nothing until it is", "cluster", s.cfg.Cluster, "err", err.Error())
			}
			if s.cfg.OnHealth != nil {
				s.cfg.OnHealth(ctx, err)
			}
		}
		if ok && time.Since(lastResync) >= s.cfg.Resync {
			s.resyncAll(ctx)
			lastResync = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// slurmUnreadable is nil when the node cache holds a recent, complete answer from Slurm.
func (s *Syncer) slurmUnreadable() error {
	switch last := s.nodes.LastSuccess(); {
	case !s.nodes.HasSynced():
		if err := s.nodes.LastError(); err != nil {
			return fmt.Errorf("no node list from Slurm yet: %w", err)
		}
		return errors.New("no node list from Slurm yet")
	case s.nodes.LastError() != nil:
		return s.nodes.LastError()
	case time.Since(last) > s.cfg.StaleAfter:
		return fmt.Errorf("no node list from Slurm for %s", time.Since(last).Round(time.Second))
	}
	return nil
}

// Healthy reports whether Slurm's state was readable at the last check.
func (s *Syncer) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthy != nil && *s.healthy
}

func (s *Syncer) resyncAll(ctx context.Context) {
	pods := &corev1.PodList{}
	if err := s.cache.List(ctx, pods, s.podSelector()...); err == nil {
		for i := range pods.Items {
			s.queue.Add(pods.Items[i].Name)
		}
	}
	for _, n := range s.nodes.List() {
		s.queue.Add(n.Name)
	}
	nodes := &corev1.NodeList{}
	if err := s.cache.List(ctx, nodes, client.MatchingLabels{wellknown.LabelCluster: s.cfg.Cluster}); err == nil {
		for i := range nodes.Items {
			s.queue.Add(nodeKeyPrefix + nodes.Items[i].Name)
		}
	}
}

func (s *Syncer) podSelector() []client.ListOption {
	return []client.ListOption{client.InNamespace(s.cfg.Namespace),
		client.MatchingLabels{wellknown.LabelCluster: s.cfg.Cluster, wellknown.LabelComponent: wellknown.ComponentCompute}}
}

func (s *Syncer) ours(p *corev1.Pod) bool {
	return p.Namespace == s.cfg.Namespace && p.Labels[wellknown.LabelCluster] == s.cfg.Cluster &&
		p.Labels[wellknown.LabelComponent] == wellknown.ComponentCompute
}

func (s *Syncer) podEvent(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok || !s.ours(p) {
		return
	}
	s.enqueue(p.Name, true)
	if p.Spec.NodeName != "" {
		s.queue.Add(nodeKeyPrefix + p.Spec.NodeName) // the node may have lost its last pod
	}
}

func (s *Syncer) nodeEvent(ctx context.Context, o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	pods, err := s.podsOn(ctx, n.Name)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing compute pods by node", "node", n.Name)
		return
	}
	for _, p := range pods {
		s.enqueue(p.Name, true)
	}
	if len(pods) == 0 && n.Labels[wellknown.LabelCluster] == s.cfg.Cluster {
		s.queue.Add(nodeKeyPrefix + n.Name)
	}
}

func (s *Syncer) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := s.cache.List(ctx, l, append(s.podSelector(), client.MatchingFields{PodNodeIndex: node})...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// enqueue queues a Slurm node and remembers when a change was first seen from each side,
// for the latency metric.
func (s *Syncer) enqueue(name string, fromKube bool) {
	now := time.Now()
	s.mu.Lock()
	o := s.seen[name]
	if fromKube && o.k8s.IsZero() {
		o.k8s = now
	}
	if !fromKube && o.slurm.IsZero() {
		o.slurm = now
	}
	s.seen[name] = o
	s.mu.Unlock()
	s.queue.Add(name)
}

func (s *Syncer) next(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	var err error
	if node, ok := strings.CutPrefix(key, nodeKeyPrefix); ok {
		err = s.syncNode(ctx, node)
	} else {
		err = s.sync(ctx, key)
	}
	if err != nil {
		// A retry loop must not flood the log: the first failure and every tenth are errors,
		// the rest debug; an unreachable Slurm is already reported once by the health change.
		l := log.FromContext(ctx).WithValues("key", key, "cluster", s.cfg.Cluster, "attempt", s.queue.NumRequeues(key)+1)
		if n := s.queue.NumRequeues(key); (n == 0 || n%10 == 0) && !errors.Is(err, slurm.ErrUnavailable) {
			l.Error(err, "sync failed; retrying")
		} else {
			l.V(1).Info("sync failed; retrying", "error", err.Error())
		}
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// sync brings one Slurm node, its compute pod and that pod's Kubernetes node into agreement.
// Nothing changes while Slurm's state is unreadable (fail closed): a stale or missing answer
// must never read as "not drained" or "no such node".
func (s *Syncer) sync(ctx context.Context, name string) error {
	if s.slurmUnreadable() != nil {
		return nil // watchHealth re-enqueues everything when Slurm is back
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
		if registered && s.cfg.Owns(&sn) {
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

// toSlurm applies the Kubernetes → Slurm rule (Decide) within the drain budget (HeldBy).
// The cache shows a change only after the next poll, so a change just sent is not sent again
// until then.
func (s *Syncer) toSlurm(ctx context.Context, pod *corev1.Pod, node *corev1.Node, sn *slurm.Node, since time.Time) error {
	causes, recheck := Causes(node, pod, time.Now(), s.cfg.NotReadyGrace)
	if recheck > 0 {
		// The pod's grace ends then: decide again, whatever else happens meanwhile.
		s.queue.AddAfter(sn.Name, recheck)
	}
	a := Decide(causes, sn)
	s.mu.Lock()
	prev, sent := s.inflight[sn.Name]
	if a.Kind == Nothing {
		delete(s.inflight, sn.Name)
	}
	s.mu.Unlock()
	if a.Kind == Nothing {
		s.budget.forget(sn.Name)
		return nil
	}
	// Sent already, and the cache still shows the node it was decided on: wait for the
	// next polls to show it; decide again afterwards in case the change was lost or undone.
	if sent && prev.action == a && prev.before == snapshot(sn) {
		if wait := s.cfg.StaleAfter - time.Since(prev.at); wait > 0 {
			s.queue.AddAfter(sn.Name, wait)
			return nil
		}
	}
	if cause, newly, b := s.budget.admit(a, sn, causes); cause != "" {
		// Held back until a drain for the same cause ends (the node cache's handler queues
		// it then) or a resync; reported once per hold.
		if newly {
			s.cfg.Metrics.drainHeld(s.cfg.Namespace, s.cfg.Cluster, cause)
			s.event(pod, corev1.EventTypeWarning, ReasonDrainHeld, "drain",
				"not draining Slurm node %s for %q: %d other nodes are drained for it, the most the drain budget allows "+
					"(%d%% of %d Slurm nodes, at least 1); it drains once one of them is resumed",
				sn.Name, cause, b.DrainedFor[cause], b.Percent, b.Nodes)
			log.FromContext(ctx).Info("drain held back by the drain budget", "node", sn.Name, "cluster", s.cfg.Cluster,
				"cause", cause, "drained", b.DrainedFor[cause], "limit", b.Limit())
		}
		return nil
	}
	u, what := slurm.NodeUpdate{State: slurm.NodeStateResume}, "resume"
	if a.Kind == Drain {
		u, what = slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &a.Reason}, "drain"
	}
	if err := s.cfg.Slurm.UpdateNode(ctx, sn.Name, u); err != nil {
		s.budget.release(sn.Name)
		s.cfg.Metrics.syncError(s.cfg.Namespace, s.cfg.Cluster, "slurm_write")
		s.event(pod, corev1.EventTypeWarning, "SlurmUpdateFailed", what, "%s of Slurm node %s failed: %v", what, sn.Name, err)
		return fmt.Errorf("%s Slurm node %s: %w", what, sn.Name, err)
	}
	s.mu.Lock()
	s.inflight[sn.Name] = inflight{action: a, at: time.Now(), before: snapshot(sn)}
	s.mu.Unlock()
	s.cfg.Metrics.corrected(s.cfg.Namespace, s.cfg.Cluster, DirectionToSlurm, what, since)
	if a.Kind == Drain {
		s.event(pod, corev1.EventTypeNormal, "SlurmNodeDrained", what, "drained Slurm node %s: %s", sn.Name, a.Reason)
	} else {
		s.event(pod, corev1.EventTypeNormal, "SlurmNodeResumed", what, "resumed Slurm node %s: no Kubernetes cause left (was %q)", sn.Name, sn.Reason)
	}
	return nil
}

// removeOrphan removes the record of a Slurm node whose pod is gone, once it has been gone
// for the grace period by the cache and is gone by a live read too.
func (s *Syncer) removeOrphan(ctx context.Context, sn *slurm.Node) error {
	s.mu.Lock()
	first, known := s.orphans[sn.Name]
	if !known {
		first = time.Now()
		s.orphans[sn.Name] = first
	}
	s.mu.Unlock()
	if wait := s.cfg.OrphanGrace - time.Since(first); wait > 0 {
		s.queue.AddAfter(sn.Name, wait)
		return nil
	}
	if busy(sn) {
		// The node's slurmd left with its pod; Slurm fails the jobs once it stops
		// responding, and the record goes after that.
		s.queue.AddAfter(sn.Name, s.cfg.OrphanGrace)
		return nil
	}
	err := s.live.Get(ctx, types.NamespacedName{Namespace: s.cfg.Namespace, Name: sn.Name}, &corev1.Pod{})
	if err == nil {
		return nil // the cache lags: the pod exists
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	if err := s.cfg.Slurm.DeleteNode(ctx, sn.Name); err != nil && !errors.Is(err, slurm.ErrNotFound) {
		s.cfg.Metrics.syncError(s.cfg.Namespace, s.cfg.Cluster, "slurm_write")
		return fmt.Errorf("removing Slurm node %s without a pod: %w", sn.Name, err)
	}
	s.forgetOrphan(sn.Name)
	s.cfg.Metrics.corrected(s.cfg.Namespace, s.cfg.Cluster, DirectionToSlurm, "remove", first)
	log.FromContext(ctx).Info("removed Slurm node without a pod", "node", sn.Name, "cluster", s.cfg.Cluster, "state", sn.State)
	return nil
}

func (s *Syncer) forgetOrphan(name string) {
	s.mu.Lock()
	delete(s.orphans, name)
	s.mu.Unlock()
}

func busy(n *slurm.Node) bool {
	return n.HasState("ALLOCATED") || n.HasState("MIXED") || n.HasState("COMPLETING")
}

// toKube writes the Slurm node's mirror on its pod and on the pod's Kubernetes node.
func (s *Syncer) toKube(ctx context.Context, pod *corev1.Pod, node *corev1.Node, sn *slurm.Node, since time.Time) error {
	if pod.Spec.NodeName == "" && sn == nil {
		return nil // not scheduled, not registered: nothing to say yet
	}
	m := Mirror{State: "unregistered", Available: false, Why: "NotRegistered"}
	msg := fmt.Sprintf("Slurm has no node %s (yet)", pod.Name)
	if sn != nil {
		m = MirrorOf(sn)
		msg = fmt.Sprintf("Slurm node %s is %s", sn.Name, m.State)
		if m.Reason != "" {
			msg += ": " + m.Reason
		}
	}
	changed, err := s.mirrorPod(ctx, pod, m, msg)
	if err != nil {
		return err
	}
	if node != nil {
		want := map[string]string{wellknown.LabelCluster: s.cfg.Cluster, wellknown.LabelSlurmNode: pod.Name}
		if ns := pod.Labels[wellknown.LabelNodeSet]; ns != "" {
			want[wellknown.LabelNodeSet] = ns
		}
		nodeChanged, err := s.mirrorNode(ctx, node, want, m, msg)
		if err != nil {
			return err
		}
		changed = changed || nodeChanged
	}
	if changed {
		s.cfg.Metrics.corrected(s.cfg.Namespace, s.cfg.Cluster, DirectionToKube, "mirror", since)
	}
	return nil
}

func (s *Syncer) mirrorPod(ctx context.Context, pod *corev1.Pod, m Mirror, msg string) (bool, error) {
	changed := false
	if pod.Annotations[wellknown.AnnotationSlurmState] != m.State || pod.Annotations[wellknown.AnnotationSlurmReason] != m.Reason {
		p := pod.DeepCopy()
		patch := client.MergeFrom(pod)
		setMirrorAnnotations(&p.ObjectMeta, m)
		if err := s.client.Patch(ctx, p, patch); err != nil {
			return false, s.kubeError(fmt.Errorf("annotating pod %s: %w", pod.Name, err))
		}
		changed = true
	}
	status := conditionStatus(m.Available)
	var cur *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if string(pod.Status.Conditions[i].Type) == wellknown.ConditionSlurmNode {
			cur = &pod.Status.Conditions[i]
		}
	}
	if cur == nil || cur.Status != status || cur.Reason != m.Why || cur.Message != msg {
		cond := corev1.PodCondition{Type: wellknown.ConditionSlurmNode, Status: status, Reason: m.Why, Message: msg,
			LastTransitionTime: metav1.Now()}
		if cur != nil && cur.Status == status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		// A strategic merge patch of just this condition: kubelet owns the others.
		orig := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy()}
		p := orig.DeepCopy()
		p.Status.Conditions = []corev1.PodCondition{cond}
		patch := client.StrategicMergeFrom(orig)
		if err := s.client.Status().Patch(ctx, p, patch); err != nil {
			return false, s.kubeError(fmt.Errorf("setting condition on pod %s: %w", pod.Name, err))
		}
		changed = true
	}
	return changed, nil
}

func (s *Syncer) mirrorNode(ctx context.Context, node *corev1.Node, labels map[string]string, m Mirror, msg string) (bool, error) {
	changed := false
	metaOK := node.Annotations[wellknown.AnnotationSlurmState] == m.State && node.Annotations[wellknown.AnnotationSlurmReason] == m.Reason
	for k, v := range labels {
		metaOK = metaOK && node.Labels[k] == v
	}
	if !metaOK {
		n := node.DeepCopy()
		patch := client.MergeFrom(node)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range labels {
			n.Labels[k] = v
		}
		setMirrorAnnotations(&n.ObjectMeta, m)
		if err := s.client.Patch(ctx, n, patch); err != nil {
			return false, s.kubeError(fmt.Errorf("labelling node %s: %w", node.Name, err))
		}
		changed = true
	}
	status := conditionStatus(m.Available)
	var cur *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == wellknown.ConditionSlurmNode {
			cur = &node.Status.Conditions[i]
		}
	}
	if cur == nil || cur.Status != status || cur.Reason != m.Why || cur.Message != msg {
		now := metav1.Now()
		cond := corev1.NodeCondition{Type: wellknown.ConditionSlurmNode, Status: status, Reason: m.Why, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: now}
		if cur != nil && cur.Status == status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		orig := &corev1.Node{ObjectMeta: *node.ObjectMeta.DeepCopy()}
		n := orig.DeepCopy()
		n.Status.Conditions = []corev1.NodeCondition{cond}
		patch := client.StrategicMergeFrom(orig)
		if err := s.client.Status().Patch(ctx, n, patch); err != nil {
			return false, s.kubeError(fmt.Errorf("setting condition on node %s: %w", node.Name, err))
		}
		changed = true
	}
	return changed, nil
}

// syncNode takes the mirror off a Kubernetes node that no longer hosts a compute pod of
// this cluster.
func (s *Syncer) syncNode(ctx context.Context, name string) error {
	if s.slurmUnreadable() != nil {
		return nil
	}
	node := &corev1.Node{}
	if err := s.cache.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if node.Labels[wellknown.LabelCluster] != s.cfg.Cluster {
		return nil
	}
	pods, err := s.podsOn(ctx, name)
	if err != nil || len(pods) > 0 {
		return err
	}
	// The condition first: the labels are what marks the node as still to be cleaned.
	raw := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"$patch":"delete"}]}}`, wellknown.ConditionSlurmNode)
	if err := s.client.Status().Patch(ctx, node.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(raw))); err != nil {
		return s.kubeError(fmt.Errorf("removing condition from node %s: %w", name, err))
	}
	n := node.DeepCopy()
	patch := client.MergeFrom(node)
	for _, k := range []string{wellknown.LabelCluster, wellknown.LabelNodeSet, wellknown.LabelSlurmNode} {
		delete(n.Labels, k)
	}
	delete(n.Annotations, wellknown.AnnotationSlurmState)
	delete(n.Annotations, wellknown.AnnotationSlurmReason)
	if err := s.client.Patch(ctx, n, patch); err != nil {
		return s.kubeError(fmt.Errorf("unlabelling node %s: %w", name, err))
	}
	return nil
}

func (s *Syncer) kubeError(err error) error {
	if apierrors.IsNotFound(err) {
		return nil // gone meanwhile; its delete event brings the next step
	}
	s.cfg.Metrics.syncError(s.cfg.Namespace, s.cfg.Cluster, "kube_write")
	return err
}

func setMirrorAnnotations(o *metav1.ObjectMeta, m Mirror) {
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[wellknown.AnnotationSlurmState] = m.State
	o.Annotations[wellknown.AnnotationSlurmReason] = m.Reason
}

func conditionStatus(ok bool) corev1.ConditionStatus {
	if ok {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

func (s *Syncer) event(pod *corev1.Pod, typ, reason, action, format string, args ...any) {
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.Eventf(pod, nil, typ, reason, action, format, args...)
	}
}
