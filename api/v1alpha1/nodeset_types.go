// The NodeSet API: the kind, its spec, update strategy and status. Its autoscaling and
// containers parts have files of their own, its condition types and reasons are in
// conditions.go.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeSetMode says how a NodeSet decides how many compute pods run, and where.
// +kubebuilder:validation:Enum=PerNode;Replicas
type NodeSetMode string

const (
	// NodeSetPerNode runs one compute pod on every Kubernetes node that the NodeSet selects,
	// like a DaemonSet. A node belongs to at most one PerNode NodeSet of a cluster: the
	// oldest NodeSet keeps it. spec.replicas, when set, caps the number of pods.
	NodeSetPerNode NodeSetMode = "PerNode"
	// NodeSetReplicas runs spec.replicas compute pods named by ordinals, wherever the
	// scheduler puts them among the selected nodes (several may share one machine).
	NodeSetReplicas NodeSetMode = "Replicas"
)

// NodeSetUpdateStrategyType is how pods of an older template are replaced.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type NodeSetUpdateStrategyType string

const (
	// RollingUpdateNodeSetStrategy replaces pods of an older template one Slurm node at a
	// time (maxUnavailable at most): drain, wait until no job runs, replace, resume.
	RollingUpdateNodeSetStrategy NodeSetUpdateStrategyType = "RollingUpdate"
	// OnDeleteNodeSetStrategy replaces a pod only when someone deletes it.
	OnDeleteNodeSetStrategy NodeSetUpdateStrategyType = "OnDelete"
)

// NodeSetSpec describes a set of compute pods, each a dynamic Slurm node (slurmd -Z) of
// the SlurmCluster named by clusterRef.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Replicas' || has(self.replicas) || has(self.autoscaling)",message="spec.replicas is required when mode is Replicas"
type NodeSetSpec struct {
	// ClusterRef is the name of the SlurmCluster, in the NodeSet's namespace, whose
	// slurmctld the nodes register with. Immutable.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterRef is immutable"
	ClusterRef string `json:"clusterRef"`

	// Mode is PerNode (one pod per selected Kubernetes node) or Replicas (spec.replicas
	// pods). Immutable.
	// +kubebuilder:default=PerNode
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.mode is immutable"
	// +optional
	Mode NodeSetMode `json:"mode,omitempty"`

	// Replicas is the number of pods in Replicas mode, and an optional cap on the number of
	// pods in PerNode mode (nodes that have a pod are kept first, then the others by node
	// name). Lowering it is a protected scale-in: each removed Slurm node is drained and its
	// pod deleted only once no job runs on it. With spec.autoscaling the operator writes it,
	// in either mode.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// NodeSelector selects the Kubernetes nodes the NodeSet may use by label.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity is required node affinity: the selected nodes must also match one of its
	// terms. Together with nodeSelector it is the selection; without either every node is
	// selected. A node that stops matching is left the protected way (drain, wait, delete).
	// +optional
	Affinity *corev1.NodeSelector `json:"affinity,omitempty"`

	// Image overrides the SlurmCluster's image for slurmd.
	// +optional
	Image Image `json:"image,omitempty"`

	// Resources of the slurmd container. Slurm's CPUs and RealMemory come from them (limit,
	// else request), not from the host, so that Slurm never hands out more than the pod has;
	// its GPUs (GRES gpu) from the nvidia.com/gpu limit.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// GPUType is the Slurm GRES type of the nodes' GPUs (for example h100), for jobs that ask
	// for --gres=gpu:h100:N. Default: from the Kubernetes node's nvidia.com/gpu.product label
	// (GPU Feature Discovery) in PerNode mode, none (untyped GPUs) in Replicas mode.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_.-]*$`
	// +optional
	GPUType string `json:"gpuType,omitempty"`

	// Env is added to the slurmd container's environment.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Volumes are added to the pods (for example PersistentVolumeClaims or host paths).
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts are added to the slurmd container.
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// Sidecars are extra containers of the pods.
	// +optional
	Sidecars []corev1.Container `json:"sidecars,omitempty"`

	// PriorityClassName is the compute pods' PriorityClass. One above the Kubernetes workloads'
	// lets a compute pod that an autoscaled NodeSet starts for a pending job preempt them from
	// the machine they took while the NodeSet was small; without it the pod waits until
	// Kubernetes frees room. docs/autoscaling.md.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Tolerations of the pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Services are s6 services run beside slurmd in every pod.
	// +listType=map
	// +listMapKey=name
	// +optional
	Services []S6Service `json:"services,omitempty"`

	// Features are Slurm node features added to the NodeSet's name, which every node of the
	// NodeSet carries (partitions select NodeSets by it).
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$`
	// +optional
	Features []string `json:"features,omitempty"`

	// Weight is the Slurm node weight: jobs go to nodes of lower weight first.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// ExtraConf is added to slurmd's --conf node line (for example "Gres=gpu:8 TmpDisk=100000").
	// A key sunk also sets (CPUs, RealMemory, Weight) replaces sunk's; features belong in
	// spec.features.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.contains('\\n')",message="spec.extraConf must be one line"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(?i)(^|\\\\s)(features?|nodename|port)=')",message="spec.extraConf must not set Features (use spec.features), NodeName or Port"
	// +optional
	ExtraConf string `json:"extraConf,omitempty"`

	// Containers lets jobs on the NodeSet's nodes run in container images with Pyxis's flags
	// (srun --container-image=...; docs/containers.md). Changing it replaces the pods (the
	// protected way).
	// +optional
	Containers *NodeSetContainers `json:"containers,omitempty"`

	// UpdateStrategy says how pods of an older template are replaced.
	// +kubebuilder:default={type: RollingUpdate}
	// +optional
	UpdateStrategy NodeSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// Autoscaling lets Slurm's queue size the NodeSet: the operator writes spec.replicas,
	// growing it for jobs that pend for nodes and shrinking it, the protected way, when nodes
	// stay idle. Slurm keeps the record of every node up to maxReplicas (in state FUTURE while
	// it has no pod), so a job sent to a NodeSet at zero pends instead of being refused. In
	// PerNode mode replicas caps the selected nodes that run a pod: an idle node's pod goes
	// and the Kubernetes node is free for other pods; a node comes back (its pod pinned to it)
	// when jobs pend for it, and the NodeSet grows to no more than the nodes it selects,
	// whatever maxReplicas says. docs/autoscaling.md.
	// +optional
	Autoscaling *NodeSetAutoscaling `json:"autoscaling,omitempty"`
}

// NodeSetUpdateStrategy is RollingUpdate (with its parameters) or OnDelete.
// +kubebuilder:validation:XValidation:rule="self.type == 'RollingUpdate' || !has(self.rollingUpdate)",message="spec.updateStrategy.rollingUpdate is only allowed when type is RollingUpdate"
type NodeSetUpdateStrategy struct {
	// Type of the strategy.
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type NodeSetUpdateStrategyType `json:"type,omitempty"`

	// RollingUpdate parameters.
	// +optional
	RollingUpdate *RollingUpdateNodeSet `json:"rollingUpdate,omitempty"`
}

// RollingUpdateNodeSet bounds a rolling update.
type RollingUpdateNodeSet struct {
	// MaxUnavailable is how many Slurm nodes (a number, or a percentage of the desired
	// nodes, rounded down) may be unavailable at once during an update; at least 1. A node
	// is unavailable while its pod is missing or not Ready, or while Slurm has it drained.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// NodeSetStatus is what sunk observed, in Kubernetes and in Slurm.
type NodeSetStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of compute pods that exist and are not being deleted.
	// +optional
	Replicas int32 `json:"replicas"`
	// Desired is the number of Slurm nodes the NodeSet should run.
	// +optional
	Desired int32 `json:"desired"`
	// Feasible is the number of Kubernetes nodes the NodeSet selects (in PerNode mode, less
	// those that an older NodeSet of the cluster holds).
	// +optional
	Feasible int32 `json:"feasible"`
	// Scheduled is the number of pods bound to a Kubernetes node.
	// +optional
	Scheduled int32 `json:"scheduled"`
	// Ready is the number of Ready pods (slurmd registered and responding).
	// +optional
	Ready int32 `json:"ready"`
	// Drained is the number of Slurm nodes of the pods that are draining or drained.
	// +optional
	Drained int32 `json:"drained"`
	// Busy is the number of Slurm nodes of the pods that run jobs.
	// +optional
	Busy int32 `json:"busy"`
	// Misscheduled is the number of pods on Kubernetes nodes the NodeSet does not select.
	// +optional
	Misscheduled int32 `json:"misscheduled"`
	// Unavailable is the number of desired Slurm nodes that cannot run jobs: no pod, a pod
	// that is not Ready, or drained.
	// +optional
	Unavailable int32 `json:"unavailable"`
	// Updated is the number of pods of the current template.
	// +optional
	Updated int32 `json:"updated"`

	// PendingNodes is the number of nodes that jobs pending in the NodeSet's partitions ask
	// for, read by the autoscaler (spec.autoscaling); 0 without it.
	// +optional
	PendingNodes int32 `json:"pendingNodes,omitempty"`
	// Parked is the number of the NodeSet's Slurm nodes without a pod whose records Slurm
	// keeps in state FUTURE for the autoscaler.
	// +optional
	Parked int32 `json:"parked,omitempty"`

	// Selector selects the NodeSet's pods (the scale subresource's label selector).
	// +optional
	Selector string `json:"selector,omitempty"`

	// TemplateHash is the hash of the current pod template (label sunk.dev/template-hash).
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`

	// Conditions: Ready, SlurmReachable, NodeConflict, ContainerCredentials.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=nss,categories=sunk
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 40 characters (it prefixes the Slurm node names)"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desired`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updated`
// +kubebuilder:printcolumn:name="Busy",type=integer,JSONPath=`.status.busy`
// +kubebuilder:printcolumn:name="Drained",type=integer,JSONPath=`.status.drained`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingNodes`,priority=1
// +kubebuilder:printcolumn:name="Feasible",type=integer,JSONPath=`.status.feasible`,priority=1
// +kubebuilder:printcolumn:name="Scheduled",type=integer,JSONPath=`.status.scheduled`,priority=1
// +kubebuilder:printcolumn:name="Unavailable",type=integer,JSONPath=`.status.unavailable`,priority=1
// +kubebuilder:printcolumn:name="Misscheduled",type=integer,JSONPath=`.status.misscheduled`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// NodeSet is a set of compute pods, each running slurmd as a dynamic Slurm node of a
// SlurmCluster.
type NodeSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeSetSpec   `json:"spec,omitempty"`
	Status NodeSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NodeSetList is a list of NodeSets.
type NodeSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodeSet{}, &NodeSetList{})
}

// ModeOrDefault is spec.mode, PerNode when unset (objects not read from the API server).
func (ns *NodeSet) ModeOrDefault() NodeSetMode {
	if ns.Spec.Mode == "" {
		return NodeSetPerNode
	}
	return ns.Spec.Mode
}
