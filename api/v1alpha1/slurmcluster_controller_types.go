// The SlurmCluster's slurmctld and slurmrestd: their images, resources, state storage and the
// settings sunk renders into their command lines and slurm.conf.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ControllerSpec configures slurmctld.
type ControllerSpec struct {
	// Image overrides spec.image for slurmctld.
	// +optional
	Image Image `json:"image,omitempty"`

	// Resources of the slurmctld container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// StateStorage is the volume of StateSaveLocation: jobs, nodes and reservations survive
	// a slurmctld restart because of it.
	// +optional
	StateStorage StorageSpec `json:"stateStorage,omitempty"`

	// Backup runs a second slurmctld as a hot standby (Slurm's backup controller). Both
	// share one ReadWriteMany state volume, so the storage class must offer that mode.
	// +optional
	Backup bool `json:"backup,omitempty"`

	// NodeWatcher runs sunk-nodewatch beside each slurmctld: it reads Slurm's node table
	// through Slurm's own library (a binary RPC that carries update_time, so an unchanged
	// table costs one small answer) and serves only the nodes that changed. sunk-syncer then
	// follows those changes instead of listing every node through slurmrestd, which keeps its
	// Slurm-to-Kubernetes latency and traffic flat as the cluster grows (docs/syncer.md).
	// +optional
	NodeWatcher bool `json:"nodeWatcher,omitempty"`

	// ExtraConf lines are added to slurm.conf. A line whose key sunk also sets replaces
	// sunk's line (the admin wins). Every key must be one Slurm knows; keys that hold sunk's
	// invariants (authentication, users, hosts, ports, state and plugin locations, the
	// cluster name, accounting storage) are refused unless listed in UnsafeConfKeys. One key
	// a line, as Slurm reads slurm.conf ("MinJobAge=5 MaxJobCount=100" on one line is refused),
	// except on NodeName=, PartitionName=, NodeSet= and DownNodes= lines, which are records.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	ExtraConf string `json:"extraConf,omitempty"`

	// UnsafeConfKeys lets ExtraConf set keys that sunk keeps for its own invariants (e.g.
	// SlurmctldParameters), for an admin who takes over what they guard. Only keys the
	// operator allows (its --allowed-unsafe-conf-keys, the sunk chart's
	// operator.allowedUnsafeConfKeys) may be listed. Each use is returned as an admission
	// warning, logged by the webhook with the requesting user, and recorded as a Warning
	// event on the SlurmCluster. Keys that only a restart applies roll slurmctld.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	UnsafeConfKeys []string `json:"unsafeConfKeys,omitempty"`
}

// StorageSpec is a PersistentVolumeClaim that sunk creates and keeps.
type StorageSpec struct {
	// Size of the claim.
	// +kubebuilder:default="1Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the claim; empty means the cluster's default class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// RestAPISpec configures slurmrestd.
type RestAPISpec struct {
	// Replicas of slurmrestd.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image overrides spec.image for slurmrestd.
	// +optional
	Image Image `json:"image,omitempty"`

	// Resources of the slurmrestd container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Threads is slurmrestd's worker thread count (-t): how many requests one replica serves
	// at once, each waiting on one slurmctld RPC. Default 32: sunk's components keep at most
	// 28 requests in flight (the operator and the syncer 4 each, sunk-scheduler 20 during a
	// burst of submissions), which leaves users 4 then; raise it if their commands slow down
	// while pods are being scheduled. Replicas x threads is the most RPCs slurmrestd puts on slurmctld
	// at once; keep it below 150, where sunk's SchedulerParameters (max_rpc_cnt) make the
	// scheduler stand back.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=1024
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// MaxConnections is how many client connections one replica holds open at once
	// (--max-connections); past it, new connections wait unaccepted and slurmrestd's own
	// readiness probe fails. Default 256: sunk's components hold at most 28 (56 while leaders
	// hand over), slurmrestd never closes an idle connection itself (so a client that
	// vanished without closing keeps its slot), and the rest is for users.
	// Each connection is a file descriptor: stay below the container's open-file limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// Version is the REST API (data parser) version sunk's operator and syncer speak to this
	// cluster's slurmrestd, one that both sunk and the cluster's Slurm know: v0.0.41 or
	// v0.0.42 for Slurm 24.11, v0.0.42 to v0.0.45 for 26.05. Empty (the default): the
	// newest both know, asked of slurmrestd once and again only when it stops serving it
	// (an upgrade of Slurm).
	// +kubebuilder:validation:Pattern=`^v[0-9]+\.[0-9]+\.[0-9]+$`
	// +kubebuilder:validation:MaxLength=16
	// +optional
	Version string `json:"version,omitempty"`
}
