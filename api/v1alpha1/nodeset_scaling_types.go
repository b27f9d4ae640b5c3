// A NodeSet's autoscaling: the bounds within which Slurm's queue sizes it (docs/autoscaling.md).
// (Not nodeset_autoscaling_types.go: a file sorting before nodeset_containers_types.go would
// change the import names controller-gen gives zz_generated.deepcopy.go.)

package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSetAutoscaling bounds a demand-driven NodeSet.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="spec.autoscaling.minReplicas must not exceed spec.autoscaling.maxReplicas"
type NodeSetAutoscaling struct {
	// MinReplicas is the fewest nodes the NodeSet keeps, idle or not.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	// +optional
	MinReplicas int32 `json:"minReplicas"`

	// MaxReplicas is the most nodes the NodeSet grows to. Slurm knows this many nodes from
	// the start: when the NodeSet is new, or maxReplicas grows, the operator starts each node
	// Slurm has no record of once, so that it registers its shape (CPUs, memory, GPUs,
	// features); it goes again, parked as a FUTURE record, after idleAfter.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxReplicas int32 `json:"maxReplicas"`

	// IdleAfter is how long a node stays idle (Slurm's last_busy) before the NodeSet lets it
	// go. Only the last nodes go (the highest-numbered; in PerNode mode the last by node name),
	// so a busy node is never drained to shrink.
	// +kubebuilder:default="5m"
	// +optional
	IdleAfter *metav1.Duration `json:"idleAfter,omitempty"`
}

// IdleAfterOrDefault is spec.autoscaling.idleAfter, 5 minutes when unset.
func (a *NodeSetAutoscaling) IdleAfterOrDefault() time.Duration {
	if a.IdleAfter == nil {
		return 5 * time.Minute
	}
	return a.IdleAfter.Duration
}
