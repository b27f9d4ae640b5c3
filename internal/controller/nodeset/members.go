package nodeset

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// selection matches Kubernetes nodes against a NodeSet's nodeSelector and required affinity,
// with the scheduler's own matching.
type selection struct {
	req nodeaffinity.RequiredNodeAffinity
}

// newSelection fails on an affinity the scheduler could not evaluate either.
func newSelection(ns *sunkv1.NodeSet) (*selection, error) {
	var aff *corev1.Affinity
	if ns.Spec.Affinity != nil {
		if _, err := nodeaffinity.NewNodeSelector(ns.Spec.Affinity); err != nil {
			return nil, fmt.Errorf("spec.affinity: %w", err)
		}
		aff = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns.Spec.Affinity}}
	}
	return &selection{req: nodeaffinity.NewRequiredNodeAffinity(ns.Spec.NodeSelector, aff)}, nil
}

func (s *selection) matches(n *corev1.Node) bool {
	ok, err := s.req.Match(n)
	return err == nil && ok
}

// older orders NodeSets by age, the name breaking ties: the older one keeps a contested node.
func older(a, b *sunkv1.NodeSet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// member is one Slurm node of a NodeSet: one it should run (desired), or one it still runs
// and must give up (why says why, and becomes the drain reason).
type member struct {
	name    string
	node    string // PerNode: the Kubernetes node
	desired bool
	why     string
	pod     *corev1.Pod // nil: no pod
	taken   bool        // a pod the NodeSet does not own has the member's name
	slurm   *slurm.Node // nil: not registered, or Slurm unknown
	listed  bool        // slurm comes from this reconcile's node list: nil means not registered
}

// Why a member is given up: the end of the drain reason "k8s: nodeset <why>".
const (
	whyScaleIn    = "scale-in"
	whyUpdate     = "update"
	whyUnselected = "node no longer selected"
	whyNodeGone   = "node deleted"
	whyDeleted    = "deleted"
)

// perNodeDesired picks the members of a PerNode NodeSet: one per selected node that no
// older NodeSet holds, at most limit of them, nodes that already have a pod first (so that a
// cap does not move pods), then by node name. It returns the conflicts it found: nodes an
// older NodeSet holds (held maps node -> that NodeSet) and nodes whose member name another
// node already has.
func perNodeDesired(nodeSet string, selected []string, held map[string]string, hasPod func(member string) bool, limit *int32) (desired []render.ComputeMember, conflicts []string, feasible int) {
	var free []render.ComputeMember
	for _, node := range selected {
		if other, ok := held[node]; ok {
			conflicts = append(conflicts, fmt.Sprintf("node %s is held by the older NodeSet %s", node, other))
			continue
		}
		free = append(free, render.ComputeMember{Name: clusternames.PerNodeMemberName(nodeSet, node), NodeName: node})
	}
	sort.SliceStable(free, func(i, j int) bool {
		pi, pj := hasPod(free[i].Name), hasPod(free[j].Name)
		if pi != pj {
			return pi
		}
		return free[i].NodeName < free[j].NodeName
	})
	seen := map[string]string{}
	for _, m := range free {
		if node, dup := seen[m.Name]; dup {
			conflicts = append(conflicts, fmt.Sprintf("nodes %s and %s have the same member name %s", node, m.NodeName, m.Name))
			continue
		}
		seen[m.Name] = m.NodeName
		desired = append(desired, m)
	}
	feasible = len(desired)
	if limit != nil && int(*limit) < len(desired) {
		desired = desired[:*limit]
	}
	sort.Slice(desired, func(i, j int) bool { return desired[i].Name < desired[j].Name })
	return desired, conflicts, feasible
}

// replicasDesired are members 0..replicas-1.
func replicasDesired(nodeSet string, replicas *int32) []render.ComputeMember {
	n := int(ptr.Deref(replicas, 0))
	out := make([]render.ComputeMember, n)
	for i := range out {
		out[i] = render.ComputeMember{Name: clusternames.OrdinalMemberName(nodeSet, i)}
	}
	return out
}

// pinnedNode is the node a PerNode pod is pinned to by its required affinity.
func pinnedNode(p *corev1.Pod) string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func drainReason(why string) string { return wellknown.DrainPrefixNodeSet + " " + why }

// ourDrain reports a node drained by the NodeSet controller.
func ourDrain(n *slurm.Node) bool {
	return n != nil && n.Drained() && wellknown.DrainByNodeSet(n.Reason)
}

func terminating(p *corev1.Pod) bool { return p != nil && !p.DeletionTimestamp.IsZero() }

// stopped reports a terminating pod whose containers no longer run: it never ran on a node,
// it ended, or kubelet (or a forced deletion) confirmed the deletion with grace period 0.
func stopped(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
		(p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0)
}

func hasFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, wellknown.FinalizerSlurmNode)
}
