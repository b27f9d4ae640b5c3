// The SlurmCluster API: the kind, its spec and its status. The controller and REST parts, the
// accounting, login and partition parts have files of their own; their length is the field
// documentation, which becomes the CRD's and `kubectl explain`'s. Its condition types and
// reasons are in conditions.go.

package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Image is a container image reference ("registry/repository:tag" or "...@sha256:digest"):
// ASCII letters, digits and . _ / : @ -, so that no whitespace, control or look-alike
// character reaches a pod spec.
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`
type Image string

// SlurmClusterSpec describes one Slurm cluster's control plane: slurmctld, slurmrestd,
// accounting, login pods and the configuration every Slurm daemon shares.
// +kubebuilder:validation:XValidation:rule="!has(self.partitions) || self.partitions.filter(p, has(p.default) && p.default).size() <= 1",message="spec.partitions: at most one partition may be the default"
// +kubebuilder:validation:XValidation:rule="!has(self.topology) || !has(self.topology.tree) || !has(self.topology.block) || (has(self.slurmVersion) && self.slurmVersion != '24.11')",message="spec.topology: tree and block together need Slurm 25.05 or later (spec.slurmVersion 26.05): 24.11 runs one topology plugin",fieldPath=".topology"
// +kubebuilder:validation:XValidation:rule="!has(self.partitions) || self.partitions.all(p, !has(p.topology) || (has(self.slurmVersion) && self.slurmVersion != '24.11'))",message="spec.partitions[].topology needs Slurm 25.05 or later (spec.slurmVersion 26.05): 24.11 knows no partition Topology=",fieldPath=".partitions"
// +kubebuilder:validation:XValidation:rule="!has(self.partitions) || self.partitions.all(p, !has(p.topology) || (has(self.topology) && (p.topology == 'tree' ? has(self.topology.tree) : has(self.topology.block))))",message="spec.partitions[].topology must name a topology spec.topology defines (tree or block)",fieldPath=".partitions"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.slurmVersion) || (has(self.slurmVersion) && self.slurmVersion >= oldSelf.slurmVersion)",message="spec.slurmVersion: Slurm cannot be downgraded (a newer slurmctld and slurmdbd have already converted their state)",fieldPath=".slurmVersion"
type SlurmClusterSpec struct {
	// SlurmVersion is the Slurm release the cluster runs: "24.11" or "26.05". It picks the
	// default image (the operator's image of that release, unless spec.image is set) and what
	// the configuration may use (topology.yaml needs 25.05 or later). Unset means 24.11, the
	// only release before the field existed; admission sets 26.05 on clusters created
	// without it. Raising it upgrades a running cluster in Slurm's order (docs/slurmcluster.md,
	// "Slurm versions"); lowering it is refused.
	// +kubebuilder:validation:Enum="24.11";"26.05"
	// +optional
	SlurmVersion string `json:"slurmVersion,omitempty"`

	// Image is the Slurm image every component runs unless it names its own. Empty: the
	// operator's image of spec.slurmVersion (its --slurm-images, the sunk chart's
	// operator.slurmImages). An image set here must hold that release of Slurm.
	// +optional
	Image Image `json:"image,omitempty"`

	// ImagePullPolicy of every Slurm container.
	// +kubebuilder:default=IfNotPresent
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets are Secrets of the cluster's namespace (kubernetes.io/dockerconfigjson)
	// with which kubelet pulls the images of every pod of the cluster: slurmctld, slurmrestd,
	// slurmdbd, MariaDB, the login pods, the config check pods and its NodeSets' compute pods.
	// (A NodeSet's containers.imagePullSecrets are another thing: credentials for jobs' images.)
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// ClusterName is Slurm's ClusterName (the accounting database key). Defaults to the
	// object's name with dashes turned into underscores. Immutable: Slurm refuses to start
	// when the state directory belongs to another cluster name.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,39}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterName is immutable"
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// Controller is slurmctld.
	// +optional
	Controller ControllerSpec `json:"controller,omitempty"`

	// RestAPI is slurmrestd, the endpoint sunk's own components use.
	// +optional
	RestAPI RestAPISpec `json:"restApi,omitempty"`

	// Accounting is slurmdbd and its database.
	// +optional
	Accounting AccountingSpec `json:"accounting,omitempty"`

	// Login pods, where users run sbatch, srun and squeue.
	// +optional
	Login LoginSpec `json:"login,omitempty"`

	// Partitions of the cluster. Without any, one default partition "all" holds every node.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Partitions []PartitionSpec `json:"partitions,omitempty"`

	// Preemption lets higher-priority jobs preempt lower-priority ones (Slurm's PreemptType
	// and PreemptMode). It is how a sunk-scheduler pod in a high-tier partition (or QOS) takes
	// nodes from Slurm batch work. Off by default.
	// +optional
	Preemption PreemptionSpec `json:"preemption,omitempty"`

	// SchedulerPolicy says what sunk-scheduler may ask of Slurm for the pods of each
	// namespace: partitions, accounts, QOS, reservations, priority, and whether they may
	// preempt Slurm jobs. A namespace no tenant lists gets the least: its pods run in the
	// default partition, with no other override, and only if that partition preempts nothing.
	// +optional
	SchedulerPolicy SchedulerPolicy `json:"schedulerPolicy,omitempty"`

	// Prolog scripts run on the compute node before every job, in the order listed; the
	// first failing script fails the prolog (Slurm then drains the node and requeues the job).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Prolog []Script `json:"prolog,omitempty"`

	// Epilog scripts run on the compute node after every job, in the order listed.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Epilog []Script `json:"epilog,omitempty"`

	// JobSubmitLua is the job_submit.lua script (Slurm's job_submit/lua plugin). At
	// admission it is parsed and its top-level code run in a sandbox (a stub slurm table, no
	// io, os or require, one second): a script that does not parse, fails at load or lacks
	// slurm_job_submit or slurm_job_modify would stop slurmctld.
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	JobSubmitLua string `json:"jobSubmitLua,omitempty"`

	// CgroupConf lines are added to cgroup.conf; a line whose key sunk also sets replaces
	// sunk's line. One key a line, as Slurm reads cgroup.conf.
	// +optional
	CgroupConf string `json:"cgroupConf,omitempty"`

	// SharedVolumes are PersistentVolumeClaims mounted into login and compute pods at the
	// same path (for example /home and /data), so that a job sees what its user sees.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	SharedVolumes []SharedVolume `json:"sharedVolumes,omitempty"`

	// NetworkPolicy limits who reaches the cluster's pods: on unless turned off.
	// +optional
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// TLS encrypts what sunk's components send to slurmrestd and the node watchers: on unless
	// turned off.
	// +optional
	TLS TLSSpec `json:"tls,omitempty"`

	// Topology renders Slurm's network topology (tree or block) from the labels of the
	// Kubernetes nodes the compute pods run on. Unset: no topology plugin.
	// +optional
	Topology *TopologySpec `json:"topology,omitempty"`
}

// Script is a prolog or epilog script: inline, or a key of a ConfigMap.
// +kubebuilder:validation:XValidation:rule="has(self.inline) != has(self.configMapKeyRef)",message="exactly one of inline and configMapKeyRef must be set"
type Script struct {
	// Name of the script (its file name).
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`
	Name string `json:"name"`

	// Inline is the script's text (with its #! line).
	// +optional
	Inline *string `json:"inline,omitempty"`

	// ConfigMapKeyRef names a ConfigMap key holding the script.
	// +optional
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
}

// SharedVolume is a PersistentVolumeClaim mounted into login and compute pods.
type SharedVolume struct {
	// Name of the volume in the pods.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`
	Name string `json:"name"`

	// ClaimName of an existing PersistentVolumeClaim (ReadWriteMany for several nodes).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ClaimName string `json:"claimName"`

	// MountPath in login and compute containers: an absolute path without control characters.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\x00-\x1f\x7f]*$`
	MountPath string `json:"mountPath"`

	// ReadOnly mounts the claim read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// SlurmClusterStatus is what sunk observed.
type SlurmClusterStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, ControllerReady, RestApiReady, AccountingReady, LoginReady, ConfigApplied,
	// and, not part of Ready, TopologyReady with spec.topology, GPUDevicesIncluded and ContainersEnabled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ClusterName is Slurm's ClusterName in use.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// Endpoints of the cluster's services.
	// +optional
	Endpoints ClusterEndpoints `json:"endpoints,omitempty"`

	// ConfigHash is the hash of the rendered configuration slurmctld runs with.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`

	// Topology is what the last rendering of topology.conf found, with spec.topology set.
	// +optional
	Topology *TopologyStatus `json:"topology,omitempty"`

	// LoginPools are spec.login.pools as last read from the directory.
	// +listType=map
	// +listMapKey=name
	// +optional
	LoginPools []LoginPoolStatus `json:"loginPools,omitempty"`
}

// ClusterEndpoints are where clients reach the cluster.
type ClusterEndpoints struct {
	// Controller is slurmctld's host:port (the --conf-server of configless daemons).
	// +optional
	Controller string `json:"controller,omitempty"`
	// RestAPI is slurmrestd's URL.
	// +optional
	RestAPI string `json:"restApi,omitempty"`
	// Login is the SSH Service's host:port.
	// +optional
	Login string `json:"login,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=slurm;sc,categories=sunk
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Slurm",type=string,JSONPath=`.status.conditions[?(@.type=="SlurmVersion")].message`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Controller",type=string,JSONPath=`.status.endpoints.controller`,priority=1
// +kubebuilder:printcolumn:name="RestAPI",type=string,JSONPath=`.status.endpoints.restApi`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SlurmCluster is a Slurm cluster's control plane deployed as Kubernetes resources.
type SlurmCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SlurmClusterSpec   `json:"spec,omitempty"`
	Status SlurmClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SlurmClusterList is a list of SlurmClusters.
type SlurmClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SlurmCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SlurmCluster{}, &SlurmClusterList{})
}

// SlurmName is Slurm's ClusterName: spec.clusterName, or the object's name with dashes
// turned into underscores (Slurm uses it as a table prefix in the accounting database).
func (c *SlurmCluster) SlurmName() string {
	if c.Spec.ClusterName != "" {
		return c.Spec.ClusterName
	}
	return strings.ReplaceAll(c.Name, "-", "_")
}
