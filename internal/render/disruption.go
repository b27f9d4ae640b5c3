package render

import (
	"math"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// ComputeDisruptionBudgetName is the name of a NodeSet's PodDisruptionBudget.
func ComputeDisruptionBudgetName(nodeSet string) string { return nodeSet + "-slurm-jobs" }

// ComputeDisruptionBudget keeps evictions (kubectl drain, autoscalers, descheduler) off every
// compute pod of the NodeSet that the syncer has not labelled evictable: a pod whose Slurm
// node may run a job. maxUnavailable 0 refuses each such eviction; kubectl drain retries, and
// once the cordon's `k8s: node cordoned` drain has let the jobs end, the syncer labels the pod
// and the eviction goes through. The NodeSet controller deletes pods itself (after its own
// drain), so the budget never holds up scale-in or updates.
//
// "Every selected pod stays" is an integer minAvailable no NodeSet reaches, not maxUnavailable
// 0: with maxUnavailable (or a percentage) the disruption controller counts the pods expected
// through their controller's scale subresource, and a PerNode NodeSet has no spec.replicas
// (autoscaling aside), so it failed with a CalculateExpectedPodCountFailed warning at every
// change of the NodeSet's pods. An integer minAvailable counts the pods it selects, for any
// controller (Kubernetes' "Specifying a Disruption Budget"); it refuses every eviction alike.
func ComputeDisruptionBudget(ns *sunkv1.NodeSet, n clusternames.Names) *policyv1.PodDisruptionBudget {
	all := intstr.FromInt32(math.MaxInt32)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns.Namespace, Name: ComputeDisruptionBudgetName(ns.Name),
			Labels: ComputeSelectorLabels(n, ns.Name),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &all,
			Selector: &metav1.LabelSelector{
				MatchLabels: ComputeSelectorLabels(n, ns.Name),
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: wellknown.LabelEvictable, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"},
				}},
			},
		},
	}
}

// ControlPlaneDisruptionBudgets keep voluntary evictions (kubectl drain, autoscalers) from
// taking more than one pod at a time of slurmctld (primary and backup: a drain of both nodes
// would stop scheduling, where one at a time fails over), slurmrestd and the login pods.
// maxUnavailable 1 never blocks a drain of a component with one pod; slurmdbd and MariaDB,
// one pod each, have none. Named as the component's workload.
func ControlPlaneDisruptionBudgets(n clusternames.Names) []*policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	var out []*policyv1.PodDisruptionBudget
	for _, c := range []struct{ name, component string }{
		{n.Controller, wellknown.ComponentController}, {n.RestAPI, wellknown.ComponentRestAPI}, {n.Login, wellknown.ComponentLogin},
	} {
		out = append(out, &policyv1.PodDisruptionBudget{
			ObjectMeta: meta(n, c.name, c.component),
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: &one,
				Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(n, c.component)},
			},
		})
	}
	return out
}
