// The SlurmCluster's partitions and the preemption between them.

package v1alpha1

// PartitionSpec is a Slurm partition.
type PartitionSpec struct {
	// Name of the partition.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`
	Name string `json:"name"`

	// NodeSets whose nodes belong to the partition (by the Feature each NodeSet's nodes
	// carry). Empty means every node.
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	NodeSets []string `json:"nodeSets,omitempty"`

	// Default makes this the partition of jobs that name none.
	// +optional
	Default bool `json:"default,omitempty"`

	// MaxTime is the partition's time limit in Slurm's format ("INFINITE", "60", "1-00:00:00").
	// +kubebuilder:default=INFINITE
	// +kubebuilder:validation:Pattern=`^(INFINITE|UNLIMITED|[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2})$`
	// +optional
	MaxTime string `json:"maxTime,omitempty"`

	// PriorityTier orders partitions for scheduling and, with spec.preemption.type
	// partition_prio, for preemption: jobs of a higher tier preempt jobs of lower tiers on
	// shared nodes.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65533
	// +optional
	PriorityTier *int32 `json:"priorityTier,omitempty"`

	// Topology is the topology of spec.topology the partition's jobs are placed by ("tree"
	// or "block"; Slurm's Topology= on the partition line). Without it, the cluster default:
	// the tree when spec.topology has both. Slurm 25.05 and later only (spec.slurmVersion
	// "26.05"): 24.11 reads one topology.conf and knows no partition Topology=.
	// +optional
	Topology TopologyName `json:"topology,omitempty"`

	// ExtraConf is added to the partition's line as is (for example "PriorityTier=10 OverSubscribe=NO").
	// +kubebuilder:validation:Pattern=`^[^\n#]*$`
	// +optional
	ExtraConf string `json:"extraConf,omitempty"`
}

// PreemptionType selects Slurm's preemption plugin.
// +kubebuilder:validation:Enum=none;partition_prio;qos
type PreemptionType string

const (
	PreemptionNone          PreemptionType = "none"
	PreemptionPartitionPrio PreemptionType = "partition_prio"
	PreemptionQOS           PreemptionType = "qos"
)

// PreemptionMode is what happens to a preempted job.
// +kubebuilder:validation:Enum=CANCEL;REQUEUE
type PreemptionMode string

const (
	PreemptionCancel  PreemptionMode = "CANCEL"
	PreemptionRequeue PreemptionMode = "REQUEUE"
)

// PreemptionSpec configures preemption.
// +kubebuilder:validation:XValidation:rule="!has(self.exemptTime) || (has(self.type) && self.type != 'none')",message="exemptTime needs a preemption type"
type PreemptionSpec struct {
	// Type: none (default), partition_prio (partitions' priorityTier decides), or qos (QOS
	// Preempt lists decide; needs accounting).
	// +kubebuilder:default=none
	// +optional
	Type PreemptionType `json:"type,omitempty"`

	// Mode: CANCEL (default) ends the preempted job, REQUEUE puts it back in the queue, where
	// it may start again once Slurm's credential lifetime (120 s by default) has passed.
	// sunk-scheduler evicts the pod of a preempted placeholder job either way.
	// +kubebuilder:default=CANCEL
	// +optional
	Mode PreemptionMode `json:"mode,omitempty"`

	// ExemptTime is the minimum run time before a job may be preempted, in Slurm's format
	// ("10", "00:10:00").
	// +kubebuilder:validation:Pattern=`^[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2}$`
	// +optional
	ExemptTime string `json:"exemptTime,omitempty"`
}
