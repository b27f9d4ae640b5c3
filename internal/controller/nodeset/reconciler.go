// Package nodeset reconciles NodeSets: compute pods that run slurmd as dynamic Slurm nodes,
// one per selected Kubernetes node (PerNode) or a number of them (Replicas). Every change
// that takes a Slurm node away (scale-in, an update, a node leaving the selection) is
// protected: drain in Slurm, wait until no job runs, and only then delete the pod. A Slurm
// answer that is not a clean success stops all of that: nothing is read as idle or drained
// that Slurm did not say is.
package nodeset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sunk.dev/sunk/internal/kube"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// Reconciler reconciles NodeSets.
type Reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// ClusterDomain is the Kubernetes cluster's DNS domain (cluster.local).
	ClusterDomain string
	// Slurm holds the process's REST client per cluster, shared with the SlurmCluster
	// controller; a Pool of its own when nil.
	Slurm *slurmconn.Pool
	// PollInterval is how soon Slurm is read again while the NodeSet waits on it (a job to
	// end, a drain to be lifted); 5s when zero. Slurm has no watch to wake the controller.
	PollInterval time.Duration
	// ResyncInterval refreshes the Slurm half of the status when nothing is pending; 60s
	// when zero.
	ResyncInterval time.Duration
}

// Reasons of conditions and events.
const (
	ReasonClusterNotFound   = "ClusterNotFound"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonSlurmUnreachable  = "SlurmUnreachable"
	ReasonReachable         = "Reachable"
	ReasonNodeHeld          = "NodeHeldByOlderNodeSet"
	ReasonNoConflict        = "NoConflict"
	ReasonWaitingForJobs    = "WaitingForJobs"
	ReasonScalingIn         = "ScalingIn"
	ReasonUpdating          = "Updating"
	ReasonProgressing       = "Progressing"
	ReasonReady             = "Ready"
	ReasonPodCreated        = "PodCreated"
	ReasonPodDeleted        = "PodDeleted"
	ReasonDrained           = "Drained"
	ReasonResumed           = "Resumed"
	ReasonRecordRemoved     = "SlurmNodeRemoved"
	ReasonPodNameTaken      = "PodNameTaken"
	ReasonRecordNotRemoved  = "SlurmNodeNotRemoved"
	ReasonRecordKept        = "SlurmNodeKept"
	defaultPollInterval     = 5 * time.Second
	defaultResyncInterval   = 60 * time.Second
	maxMessageItems         = 5
	conditionMessageMaxSize = 1024
)

// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets/finalizers,verbs=update
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets;services,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile walks the steps in order; each returns early when it cannot go on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &sunkv1.NodeSet{}
	if err := r.Get(ctx, req.NamespacedName, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return r.releaseOrphans(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !ns.DeletionTimestamp.IsZero() {
		// The garbage collector deletes the pods; their Slurm records go as they stop.
		return r.releaseOrphans(ctx, ns.Namespace, ns.Name)
	}
	st := newStatus(ns)
	result, err := r.reconcile(ctx, ns, st)
	if uerr := r.updateStatus(ctx, ns, st); uerr != nil && err == nil {
		err = uerr
	}
	return result, err
}

// world is what one reconcile knows about a NodeSet.
type world struct {
	ns      *sunkv1.NodeSet
	sc      *sunkv1.SlurmCluster
	names   render.Names
	hash    string
	sel     *selection
	nodes   map[string]*corev1.Node
	members []*member // by name
	sl      slurm.Client
	// slurmErr is why Slurm could not be read (nil: the node list was read).
	slurmErr error
}

func (r *Reconciler) reconcile(ctx context.Context, ns *sunkv1.NodeSet, st *status) (ctrl.Result, error) {
	w := &world{ns: ns}

	// 1. The SlurmCluster. Without it nothing is created, drained or deleted.
	sc := &sunkv1.SlurmCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns.Namespace, Name: ns.Spec.ClusterRef}, sc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		st.set(sunkv1.ConditionReady, false, ReasonClusterNotFound, fmt.Sprintf("SlurmCluster %s does not exist", ns.Spec.ClusterRef))
		return ctrl.Result{}, nil
	}
	if !sc.DeletionTimestamp.IsZero() {
		st.set(sunkv1.ConditionReady, false, ReasonClusterNotFound, fmt.Sprintf("SlurmCluster %s is being deleted", ns.Spec.ClusterRef))
		return ctrl.Result{}, nil
	}
	w.sc, w.names = sc, render.NamesFor(sc, r.ClusterDomain)
	w.hash = render.ComputeTemplateHash(ns, sc, w.names)
	st.hash = w.hash
	st.selector = labels.SelectorFromSet(render.ComputeSelectorLabels(w.names, ns.Name)).String()

	// 2. The selection: which Kubernetes nodes the NodeSet may use.
	sel, err := newSelection(ns)
	if err != nil {
		st.set(sunkv1.ConditionReady, false, ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil
	}
	w.sel = sel
	// Selection needs only labels and names: nodes are watched as metadata, which keeps
	// the cache small on clusters of thousands of nodes.
	nodeList := &metav1.PartialObjectMetadataList{}
	nodeList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.List(ctx, nodeList); err != nil {
		return ctrl.Result{}, err
	}
	w.nodes = map[string]*corev1.Node{}
	for i := range nodeList.Items {
		w.nodes[nodeList.Items[i].Name] = &corev1.Node{ObjectMeta: nodeList.Items[i].ObjectMeta}
	}

	// 3. The members: those to run, and those whose pods still exist.
	if err := r.members(ctx, w, st); err != nil {
		return ctrl.Result{}, err
	}

	// 4. Slurm: one list for every member's node. An error leaves every node unknown.
	r.readSlurm(ctx, w, st)

	// 5. The s6 services the pods mount.
	if err := r.applyServices(ctx, ns, w.names); err != nil {
		return ctrl.Result{}, err
	}

	// 6. Plan on the snapshot, then act: create, retire (drain, wait, delete), resume,
	// release. Every pod deletion is decided on a fresh read of its Slurm node.
	actions := plan(planInput{
		members:        w.members,
		outdated:       func(m *member) bool { return outdated(w, m) },
		strategy:       strategyOf(ns),
		maxUnavailable: maxUnavailable(ns, st.desired),
		slurmKnown:     w.slurmErr == nil,
	})
	o := &outcome{}
	for _, a := range actions {
		if err := r.act(ctx, w, a, o, st); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 7. Status: counts from both worlds, and what the NodeSet waits for.
	r.count(w, st)
	return r.conclude(w, st, o), nil
}

// members computes the desired members and attaches the pods that exist.
func (r *Reconciler) members(ctx context.Context, w *world, st *status) error {
	ns := w.ns
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns.Namespace), client.MatchingLabels{wellknown.LabelNodeSet: ns.Name}); err != nil {
		return err
	}
	owned := map[string]*corev1.Pod{}
	var foreign []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if metav1.IsControlledBy(p, ns) {
			owned[p.Name] = p
		} else {
			foreign = append(foreign, p)
		}
	}
	var selected []string
	for name, n := range w.nodes {
		if w.sel.matches(n) {
			selected = append(selected, name)
		}
	}
	sort.Strings(selected)

	var desired []render.ComputeMember
	var conflicts []string
	held := map[string]string{}
	if ns.ModeOrDefault() == sunkv1.NodeSetPerNode {
		var err error
		if held, err = r.heldByOlder(ctx, ns, selected, w.nodes); err != nil {
			return err
		}
		hasPod := func(name string) bool { p := owned[name]; return p != nil && !terminating(p) }
		desired, conflicts, st.feasible = perNodeDesired(ns.Name, selected, held, hasPod, ns.Spec.Replicas)
	} else {
		desired, st.feasible = replicasDesired(ns.Name, ns.Spec.Replicas), len(selected)
	}
	st.desired = len(desired)

	byName := map[string]*member{}
	for _, d := range desired {
		byName[d.Name] = &member{name: d.Name, node: d.NodeName, desired: true}
	}
	for name, p := range owned {
		m := byName[name]
		if m == nil {
			m = &member{name: name, why: r.whyNotDesired(w, p, held)}
			byName[name] = m
		}
		m.pod = p
	}
	// Pods of the NodeSet's name that it does not control: leftovers of an earlier NodeSet
	// of the same name (released here once stopped, like its own), or someone else's.
	for _, p := range foreign {
		m := byName[p.Name]
		if terminating(p) {
			if hasFinalizer(p) && (m == nil || m.pod == nil) {
				if m == nil {
					m = &member{name: p.Name, why: whyScaleIn}
					byName[p.Name] = m
				}
				m.pod = p
			}
			continue
		}
		if m != nil && m.pod == nil {
			m.taken = true
		}
		conflicts = append(conflicts, fmt.Sprintf("pod %s has the NodeSet's label but belongs to another owner", p.Name))
	}
	for _, m := range byName {
		w.members = append(w.members, m)
	}
	sort.Slice(w.members, func(i, j int) bool { return w.members[i].name < w.members[j].name })
	st.conflicts = append(st.conflicts, conflicts...)
	return nil
}

// heldByOlder maps each selected node that an older PerNode NodeSet of the same cluster
// also selects to that NodeSet: the older one keeps it.
func (r *Reconciler) heldByOlder(ctx context.Context, ns *sunkv1.NodeSet, selected []string, nodes map[string]*corev1.Node) (map[string]string, error) {
	var list sunkv1.NodeSetList
	if err := r.List(ctx, &list, client.InNamespace(ns.Namespace)); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return older(&list.Items[i], &list.Items[j]) })
	held := map[string]string{}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == ns.UID || !older(other, ns) || other.Spec.ClusterRef != ns.Spec.ClusterRef || other.ModeOrDefault() != sunkv1.NodeSetPerNode {
			continue
		}
		osel, err := newSelection(other)
		if err != nil {
			continue
		}
		for _, name := range selected {
			if _, ok := held[name]; !ok && osel.matches(nodes[name]) {
				held[name] = other.Name
			}
		}
	}
	return held, nil
}

// whyNotDesired says why a pod's member is no longer wanted.
func (r *Reconciler) whyNotDesired(w *world, p *corev1.Pod, held map[string]string) string {
	if w.ns.ModeOrDefault() != sunkv1.NodeSetPerNode {
		return whyScaleIn
	}
	node := pinnedNode(p)
	n, ok := w.nodes[node]
	switch {
	case !ok:
		return whyNodeGone
	case !w.sel.matches(n):
		return whyUnselected
	case held[node] != "":
		return "node held by the older NodeSet " + held[node]
	}
	return whyScaleIn
}

// outdated reports a desired member whose pod must be replaced.
func outdated(w *world, m *member) bool {
	p := m.pod
	if p.Labels[wellknown.LabelTemplateHash] != w.hash {
		return true
	}
	if m.node != "" {
		return pinnedNode(p) != m.node
	}
	return misscheduled(w, p)
}

// misscheduled reports a pod bound to a node the NodeSet does not select (or that is gone).
func misscheduled(w *world, p *corev1.Pod) bool {
	if p.Spec.NodeName == "" {
		return false
	}
	n, ok := w.nodes[p.Spec.NodeName]
	return !ok || !w.sel.matches(n)
}

func strategyOf(ns *sunkv1.NodeSet) sunkv1.NodeSetUpdateStrategyType {
	if ns.Spec.UpdateStrategy.Type == "" {
		return sunkv1.RollingUpdateNodeSetStrategy
	}
	return ns.Spec.UpdateStrategy.Type
}

// maxUnavailable resolves spec.updateStrategy.rollingUpdate.maxUnavailable against the
// desired count: a percentage rounds down, and the result is at least 1, since an update
// that may take nothing away never ends.
func maxUnavailable(ns *sunkv1.NodeSet, desired int) int {
	mu := intstr.FromInt32(1)
	if ru := ns.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		mu = *ru.MaxUnavailable
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(&mu, desired, false)
	if err != nil || v < 1 {
		return 1
	}
	return v
}

// readSlurm attaches each member's Slurm node from one list. It fails closed: on any error
// no member has a Slurm node and the plan does nothing that depends on Slurm.
func (r *Reconciler) readSlurm(ctx context.Context, w *world, st *status) {
	w.sl, w.slurmErr = r.slurmClient(ctx, w.names)
	if w.slurmErr == nil {
		var list *slurm.NodeList
		if list, w.slurmErr = w.sl.ListNodes(ctx, time.Time{}); w.slurmErr == nil {
			byName := make(map[string]*slurm.Node, len(list.Nodes))
			for i := range list.Nodes {
				byName[list.Nodes[i].Name] = &list.Nodes[i]
			}
			for _, m := range w.members {
				m.slurm = byName[m.name]
			}
		}
	}
	if w.slurmErr != nil {
		st.slurmFailure(w.slurmErr)
	}
}

// slurmClient authenticates with the cluster's JWT key, which only the SlurmCluster
// controller creates.
func (r *Reconciler) slurmClient(ctx context.Context, n render.Names) (slurm.Client, error) {
	return r.Slurm.For(ctx, n)
}

// applyServices keeps the ConfigMap of the NodeSet's s6 services, owned by the NodeSet.
func (r *Reconciler) applyServices(ctx context.Context, ns *sunkv1.NodeSet, n render.Names) error {
	desired := render.ComputeServicesConfigMap(ns, n)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Namespace, Name: render.ComputeServicesName(ns.Name)}}
	if desired == nil {
		if err := r.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return client.IgnoreNotFound(err)
		}
		if metav1.IsControlledBy(cm, ns) {
			return client.IgnoreNotFound(r.Delete(ctx, cm))
		}
		return nil
	}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if cm.UID != "" && !metav1.IsControlledBy(cm, ns) {
			return fmt.Errorf("ConfigMap %s exists and is not owned by NodeSet %s: refusing to take it over", cm.Name, ns.Name)
		}
		cm.Labels, cm.Data = desired.Labels, desired.Data
		return controllerutil.SetControllerReference(ns, cm, r.Scheme)
	})
	return err
}

// outcome collects what the actions could not finish, for the conditions and the requeue.
type outcome struct {
	waitingForJobs []string // members whose Slurm node still runs jobs
	waiting        []string // members waiting for something else (Slurm, kubelet)
	slurmErrs      []string
	retiring       int
}

// act carries out one action.
func (r *Reconciler) act(ctx context.Context, w *world, a action, o *outcome, st *status) error {
	switch a.kind {
	case actCreate:
		return r.create(ctx, w, a.m, st)
	case actRetire:
		o.retiring++
		return r.retire(ctx, w, a.m, a.reason, o)
	case actResume:
		if err := w.sl.UpdateNode(ctx, a.m.name, slurm.NodeUpdate{State: slurm.NodeStateResume}); err != nil {
			o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("resuming %s: %v", a.m.name, err))
			return nil
		}
		r.event(w.ns, corev1.EventTypeNormal, ReasonResumed, "resumed Slurm node %s (was drained: %s)", a.m.name, a.m.slurm.Reason)
		a.m.slurm.State = slices.DeleteFunc(slices.Clone(a.m.slurm.State), func(s string) bool { return s == "DRAIN" })
		return nil
	case actRelease:
		return r.release(ctx, w.ns, w.sl, w.slurmErr, a.m, o)
	}
	return fmt.Errorf("unknown action %d", a.kind)
}

func (r *Reconciler) create(ctx context.Context, w *world, m *member, st *status) error {
	pod := render.ComputePod(w.ns, w.sc, w.names, render.ComputeMember{Name: m.name, NodeName: m.node})
	if err := controllerutil.SetControllerReference(w.ns, pod, r.Scheme); err != nil {
		return err
	}
	err := r.Create(ctx, pod)
	switch {
	case err == nil:
		r.event(w.ns, corev1.EventTypeNormal, ReasonPodCreated, "created pod %s", pod.Name)
		m.pod = pod
		return nil
	case apierrors.IsAlreadyExists(err):
		// Our own pod the cache has not shown yet, or someone else's.
		existing := &corev1.Pod{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !metav1.IsControlledBy(existing, w.ns) {
			st.conflicts = append(st.conflicts, fmt.Sprintf("pod %s exists and belongs to another owner", pod.Name))
		}
		return nil
	}
	return fmt.Errorf("creating pod %s: %w", pod.Name, err)
}

// retire takes a member's pod away the protected way. The pod is deleted only when a fresh
// read says its Slurm node is drained and runs no job, or that Slurm has no such node and
// the pod is not Ready (a Ready pod is a registered node: the answer is not trusted). A pod
// that never ran on a node has no slurmd and goes at once. Every Slurm error stops here.
func (r *Reconciler) retire(ctx context.Context, w *world, m *member, reason string, o *outcome) error {
	p := m.pod
	if p.Spec.NodeName == "" {
		return r.deletePod(ctx, w.ns, p, "it never ran on a node ("+strings.TrimPrefix(reason, wellknown.DrainPrefixNodeSet+" ")+")")
	}
	if w.sl == nil {
		o.waiting = append(o.waiting, m.name)
		return nil
	}
	sn, err := w.sl.GetNode(ctx, m.name)
	if err == nil && !sn.Drained() {
		if err = w.sl.UpdateNode(ctx, m.name, slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err == nil {
			r.event(w.ns, corev1.EventTypeNormal, ReasonDrained, "drained Slurm node %s: %s", m.name, reason)
			sn, err = w.sl.GetNode(ctx, m.name)
		}
	}
	switch {
	case errors.Is(err, slurm.ErrNotFound) && !kube.PodReady(p):
		return r.deletePod(ctx, w.ns, p, "its Slurm node is not registered and the pod is not Ready")
	case errors.Is(err, slurm.ErrNotFound):
		o.waiting = append(o.waiting, m.name)
		return nil
	case err != nil:
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("%s: %v", m.name, err))
		return nil
	}
	m.slurm = sn
	if !sn.Drained() {
		o.waiting = append(o.waiting, m.name)
		return nil
	}
	if sn.Busy() {
		o.waitingForJobs = append(o.waitingForJobs, m.name)
		return nil
	}
	return r.deletePod(ctx, w.ns, p, fmt.Sprintf("its Slurm node is drained (%s) and runs no job", sn.Reason))
}

func (r *Reconciler) deletePod(ctx context.Context, ns *sunkv1.NodeSet, p *corev1.Pod, why string) error {
	uid := p.UID
	if err := r.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("deleting pod %s: %w", p.Name, err)
	}
	r.event(ns, corev1.EventTypeNormal, ReasonPodDeleted, "deleted pod %s: %s", p.Name, why)
	return nil
}

// release lets a stopped pod go once its Slurm node record is removed: for a member gone
// for good, and for a replaced one too, because slurmctld applies a dynamic node's --conf
// (Features, CPUs, RealMemory, Weight) only when it creates the record; a new slurmd that
// finds its name registered is only checked against the old record. A replaced member's
// record stays when it carries a drain that no sunk component set (a person's, or Slurm's
// own), so that the reason survives the replacement; drains with the "k8s:" prefix are
// derived from Kubernetes state and set again by their owner when still due.
func (r *Reconciler) release(ctx context.Context, ns *sunkv1.NodeSet, sl slurm.Client, slurmErr error, m *member, o *outcome) error {
	p := m.pod
	if p.Spec.NodeName == "" {
		return removeFinalizer(ctx, r.Client, p) // never ran: never registered
	}
	if going, err := r.namespaceTerminating(ctx, p.Namespace); err != nil {
		return err
	} else if going {
		// The whole namespace goes, slurmctld with it: there is no record left to protect,
		// and waiting for an unreachable Slurm would hold the namespace forever.
		return removeFinalizer(ctx, r.Client, p)
	}
	if sl == nil {
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("removing Slurm node %s: %v", m.name, slurmErr))
		return nil
	}
	why := "its pod is gone for good"
	if m.desired {
		n, err := sl.GetNode(ctx, m.name)
		switch {
		case errors.Is(err, slurm.ErrNotFound):
			return removeFinalizer(ctx, r.Client, p)
		case err != nil:
			o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("reading Slurm node %s: %v", m.name, err))
			return nil
		case n.Drained() && !wellknown.DrainBySunk(n.Reason):
			r.event(ns, corev1.EventTypeNormal, ReasonRecordKept, "kept Slurm node %s for its replacement: drained by someone else (%s)", m.name, n.Reason)
			return removeFinalizer(ctx, r.Client, p)
		}
		why = "its replacement registers afresh with the current template"
	}
	if err := sl.DeleteNode(ctx, m.name); err != nil && !errors.Is(err, slurm.ErrNotFound) {
		o.slurmErrs = append(o.slurmErrs, fmt.Sprintf("removing Slurm node %s: %v", m.name, err))
		return nil
	} else if err == nil {
		r.event(ns, corev1.EventTypeNormal, ReasonRecordRemoved, "removed Slurm node %s: %s", m.name, why)
	}
	return removeFinalizer(ctx, r.Client, p)
}

func (r *Reconciler) namespaceTerminating(ctx context.Context, name string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !ns.DeletionTimestamp.IsZero(), nil
}

func removeFinalizer(ctx context.Context, c client.Client, p *corev1.Pod) error {
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Finalizers = slices.DeleteFunc(slices.Clone(p.Finalizers), func(f string) bool { return f == wellknown.FinalizerSlurmNode })
	if err := c.Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing pod %s: %w", p.Name, err)
	}
	return nil
}

// releaseOrphans releases the stopped pods of a NodeSet that is gone or going: Slurm
// records are removed when the cluster still exists, and otherwise left with it.
func (r *Reconciler) releaseOrphans(ctx context.Context, namespace, name string) (ctrl.Result, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{wellknown.LabelNodeSet: name}); err != nil {
		return ctrl.Result{}, err
	}
	clients := map[string]slurm.Client{}
	var requeue bool
	for i := range pods.Items {
		p := &pods.Items[i]
		if !terminating(p) || !hasFinalizer(p) {
			continue
		}
		if !stopped(p) {
			requeue = true
			continue
		}
		var sl slurm.Client
		var slErr error
		cluster := p.Labels[wellknown.LabelCluster]
		sc := &sunkv1.SlurmCluster{}
		err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: cluster}, sc)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && !sc.DeletionTimestamp.IsZero()):
			// The Slurm cluster goes too: nothing to remove the record from.
			if err := removeFinalizer(ctx, r.Client, p); err != nil {
				return ctrl.Result{}, err
			}
			continue
		case err != nil:
			return ctrl.Result{}, err
		}
		if sl = clients[cluster]; sl == nil {
			if sl, slErr = r.slurmClient(ctx, render.NamesFor(sc, r.ClusterDomain)); slErr == nil {
				clients[cluster] = sl
			}
		}
		o := &outcome{}
		if err := r.release(ctx, nil, sl, slErr, &member{name: p.Name, pod: p}, o); err != nil {
			return ctrl.Result{}, err
		}
		if len(o.slurmErrs) > 0 {
			requeue = true
			log.FromContext(ctx).Info("keeping a stopped compute pod until its Slurm node is removed", "pod", p.Name, "error", o.slurmErrs[0])
			if r.Recorder != nil {
				r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonRecordNotRemoved, "Release", "%s", o.slurmErrs[0])
			}
		}
	}
	if requeue {
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return defaultPollInterval
}

func (r *Reconciler) resync() time.Duration {
	if r.ResyncInterval > 0 {
		return r.ResyncInterval
	}
	return defaultResyncInterval
}

func (r *Reconciler) event(ns *sunkv1.NodeSet, typ, reason, format string, args ...any) {
	if r.Recorder != nil && ns != nil {
		r.Recorder.Eventf(ns, nil, typ, reason, "Reconcile", format, args...)
	}
}

// SetupWithManager watches NodeSets, their pods and ConfigMaps, the NodeSets they share a
// cluster with (an older one holds contested nodes), Kubernetes nodes (which ones are
// selected) and SlurmClusters.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("sunk-operator")
	}
	if r.Slurm == nil {
		r.Slurm = slurmconn.New(slurmconn.Options{Reader: mgr.GetClient()})
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&sunkv1.NodeSet{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.ConfigMap{}).
		Watches(&sunkv1.NodeSet{}, handler.EnqueueRequestsFromMapFunc(r.siblings),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(nodeMetadata(), handler.EnqueueRequestsFromMapFunc(r.allNodeSets),
			builder.OnlyMetadata, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&sunkv1.SlurmCluster{}, handler.EnqueueRequestsFromMapFunc(r.nodeSetsOfCluster)).
		Complete(r)
}

func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return m
}

func (r *Reconciler) requests(ctx context.Context, opts []client.ListOption, keep func(*sunkv1.NodeSet) bool) []ctrl.Request {
	var list sunkv1.NodeSetList
	if err := r.List(ctx, &list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "listing NodeSets")
		return nil
	}
	var reqs []ctrl.Request
	for i := range list.Items {
		if keep(&list.Items[i]) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (r *Reconciler) siblings(ctx context.Context, o client.Object) []ctrl.Request {
	ns, ok := o.(*sunkv1.NodeSet)
	if !ok {
		return nil
	}
	return r.requests(ctx, []client.ListOption{client.InNamespace(ns.Namespace)}, func(other *sunkv1.NodeSet) bool {
		return other.UID != ns.UID && other.Spec.ClusterRef == ns.Spec.ClusterRef
	})
}

func (r *Reconciler) allNodeSets(ctx context.Context, _ client.Object) []ctrl.Request {
	return r.requests(ctx, nil, func(*sunkv1.NodeSet) bool { return true })
}

func (r *Reconciler) nodeSetsOfCluster(ctx context.Context, o client.Object) []ctrl.Request {
	return r.requests(ctx, []client.ListOption{client.InNamespace(o.GetNamespace())}, func(ns *sunkv1.NodeSet) bool {
		return ns.Spec.ClusterRef == o.GetName()
	})
}
