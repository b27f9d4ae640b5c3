package nodeset

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
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

// selected are the nodes the selection matches, by name.
func (s *selection) selected(nodes map[string]*corev1.Node) []string {
	var out []string
	for name, n := range nodes {
		if s.matches(n) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
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
