// Membership: which Slurm nodes the NodeSet runs (selected Kubernetes nodes, nodes held by an
// older NodeSet, outdated and misscheduled pods), and what Slurm says of each.

package nodeset

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// candidates lists the NodeSet's pods and orders the members spec.replicas may take
// (memberOrder), once for the autoscaler and the members step alike.
//
// The pods are the cache's own, not deep copies (client.UnsafeDisableDeepCopy): copying every
// pod of a 5,000-member NodeSet at each reconcile, and collecting the garbage, was about two
// thirds of a reconcile's CPU (BenchmarkOperator's profile). A reconcile reads them and must
// never change one in place: the one write to a listed pod, removeFinalizer's patch, works on
// a copy; a pod's deletion only reads its name and UID.
func (r *Reconciler) candidates(ctx context.Context, w *world) error {
	ns := w.ns
	if err := r.List(ctx, &w.pods, client.InNamespace(ns.Namespace), client.MatchingLabels{wellknown.LabelNodeSet: ns.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	w.owned = map[string]*corev1.Pod{}
	for i := range w.pods.Items {
		p := &w.pods.Items[i]
		if metav1.IsControlledBy(p, ns) {
			w.owned[p.Name] = p
		} else {
			w.foreign = append(w.foreign, p)
		}
	}
	w.selected = w.sel.selected(w.nodes)
	w.order = replicasOrder(ns.Name)
	if ns.ModeOrDefault() != sunkv1.NodeSetPerNode || !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	var err error
	if w.held, err = r.heldByOlder(ctx, ns, w.selected, w.nodes); err != nil {
		return err
	}
	hasPod := func(name string) bool { p := w.owned[name]; return p != nil && !terminating(p) }
	candidates, conflicts := perNodeOrder(ns.Name, w.selected, w.held, hasPod)
	w.order, w.orderConflicts = perNodeMemberOrder(ns.Name, candidates), conflicts
	return nil
}

// perNodeCandidateCount is how many candidates another PerNode NodeSet has (perNodeOrder):
// what the autoscaler of each NodeSet of the cluster counts alike when it splits a job among
// them. A NodeSet whose affinity cannot be read has none.
func (r *Reconciler) perNodeCandidateCount(ctx context.Context, ns *sunkv1.NodeSet, nodes map[string]*corev1.Node) (int, error) {
	sel, err := newSelection(ns)
	if err != nil {
		return 0, nil
	}
	selected := sel.selected(nodes)
	held, err := r.heldByOlder(ctx, ns, selected, nodes)
	if err != nil {
		return 0, err
	}
	candidates, _ := perNodeOrder(ns.Name, selected, held, func(string) bool { return false })
	return len(candidates), nil
}

// members computes the desired members and attaches the pods that exist.
func (r *Reconciler) members(w *world, st *status) {
	ns := w.ns
	var desired []render.ComputeMember
	conflicts := slices.Clone(w.orderConflicts)
	switch {
	case !ns.DeletionTimestamp.IsZero():
		// Deleted: a scale-in to zero (finalize).
		st.feasible = len(w.selected)
	case w.order.perNode:
		desired = w.order.desired(ns.Spec.Replicas)
		st.feasible = len(w.order.candidates)
	default:
		desired, st.feasible = w.order.desired(ns.Spec.Replicas), len(w.selected)
	}
	st.desired = len(desired)

	byName := map[string]*member{}
	for _, d := range desired {
		byName[d.Name] = &member{name: d.Name, node: d.NodeName, desired: true}
	}
	for name, p := range w.owned {
		m := byName[name]
		if m == nil {
			m = &member{name: name, why: r.whyNotDesired(w, p)}
			byName[name] = m
		}
		m.pod = p
	}
	// Pods of the NodeSet's name that it does not control: leftovers of an earlier NodeSet
	// of the same name (released here once stopped, like its own), or someone else's.
	for _, p := range w.foreign {
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
func (r *Reconciler) whyNotDesired(w *world, p *corev1.Pod) string {
	if !w.ns.DeletionTimestamp.IsZero() {
		return whyDeleted
	}
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
	case w.held[node] != "":
		return "node held by the older NodeSet " + w.held[node]
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

// readSlurm attaches each member's Slurm node from the cluster's node table: as the
// autoscaler read it in this reconcile, else read now from the process's one table of the cluster
// (slurmconn.Pool.Nodes: the node watchers' cache when the cluster has them, else read through
// slurmrestd with update_time, shared by the cluster's NodeSets). It fails
// closed: on any error (an unreadable watcher, a cache not synced yet) no member has a Slurm
// node and the plan does nothing that depends on Slurm. What deletes a pod or a record reads
// its node afresh first (retire, release): the cache may be a poll behind.
func (r *Reconciler) readSlurm(ctx context.Context, w *world) {
	w.sl, w.slurmErr = r.slurmClient(ctx, w.names, w.sc.Spec.RestAPI.Version)
	if w.slurmErr == nil {
		nodes := w.slurmNodes // the autoscaler's read of this reconcile, when it made one
		if !w.slurmNodesRead {
			nodes, w.slurmErr = r.Slurm.Nodes(ctx, w.names, w.sc.Spec.Controller.NodeWatcher, w.sl)
		}
		if w.slurmErr == nil {
			byName := make(map[string]*slurm.Node, len(nodes))
			for i := range nodes {
				byName[nodes[i].Name] = &nodes[i]
			}
			for _, m := range w.members {
				m.slurm, m.listed = byName[m.name], true
			}
		}
	}
}

// slurmClient authenticates with the cluster's JWT key, which only the SlurmCluster
// controller creates, and speaks its spec.restApi.version (or the newest both sides know).
func (r *Reconciler) slurmClient(ctx context.Context, n clusternames.Names, version string) (slurm.Client, error) {
	return r.Slurm.For(ctx, n, version)
}
