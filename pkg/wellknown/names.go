// Package wellknown is the one home of the names sunk's components agree on: the labels,
// annotations, taints and finalizers they write and read on Kubernetes objects, the drain
// reasons they write on Slurm nodes, and the GRES names of GPUs (gpu.go). The operator, the
// syncer and the scheduler (its own Go module) import them from here; a name defined anywhere
// else is a bug.
package wellknown

import "strings"

// SlurmUser is the Slurm daemons' user, and the user sunk's components act as over REST: the
// name the JWTs of the operator, the syncer and sunk-scheduler carry.
const SlurmUser = "slurm"

// Keys of a SlurmCluster's JWT key Secret (<cluster>-jwt-key), which the operator writes and
// the operator, the syncer and sunk-scheduler read.
const (
	SecretJWTKey = "jwt.key"
	// SecretJWTPreviousKey holds the JWT key a rotation replaces, until slurmctld has loaded
	// the new one (docs/security.md, "Rotating keys"): sunk's clients fall back to it meanwhile.
	// A reader of the mounted Secret finds it beside jwt.key by slurm.FallbackKeySuffix.
	SecretJWTPreviousKey = SecretJWTKey + ".previous"
)

// Labels of every object a SlurmCluster owns.
const (
	// LabelCluster names the SlurmCluster an object belongs to (also on Kubernetes nodes that
	// run one of its compute pods).
	LabelCluster = "sunk.dev/cluster"
	// LabelComponent is the role of a pod: one of the Component* values.
	LabelComponent = "sunk.dev/component"
	// LabelSlurmVersion is the Slurm release a pod runs (spec.slurmVersion when the pod was
	// made); a pod without it runs 24.11. The operator reads the cluster's running releases
	// from it (the SlurmVersion condition).
	LabelSlurmVersion = "sunk.dev/slurm-version"
)

// Values of LabelComponent.
const (
	ComponentController = "controller"
	ComponentRestAPI    = "restapi"
	ComponentAccounting = "accounting"
	ComponentDatabase   = "database"
	ComponentLogin      = "login"
	// ComponentLoginUser: a login pod of one directory user, from a PerUser login pool
	// (spec.login.pools), running as that user.
	ComponentLoginUser = "login-user"
	// ComponentLoginGroup: a login pod of a Group login pool, which only the members of the
	// pool's directory group may log in to.
	ComponentLoginGroup = "login-group"
	// ComponentCompute: a compute pod, one slurmd, one dynamic Slurm node.
	ComponentCompute = "compute"
	// ComponentConfigCheck: a short-lived pod in which Slurm's own parser checks a new
	// configuration before the operator applies it (the operator's --slurm-config-check).
	ComponentConfigCheck = "config-check"
)

// Labels and annotations of a PerUser login pool's objects (one StatefulSet, Service and
// Secret per user).
const (
	// LabelLoginPool names the pool (spec.login.pools[].name), on a Group pool's objects too.
	LabelLoginPool = "sunk.dev/login-pool"
	// LabelLoginUser is the user's name made a label value (clusternames.LoginUserSlug); the
	// name as the directory spells it is in AnnotationLoginUser.
	LabelLoginUser      = "sunk.dev/login-user"
	AnnotationLoginUser = "sunk.dev/login-user"
	// AnnotationLoginUserLeft is when the operator first found the user gone from the pool's
	// group (RFC 3339): the objects go once the pool's grace period has passed since.
	AnnotationLoginUserLeft = "sunk.dev/login-user-left"
)

// Labels and the finalizer of compute pods (and, mirrored by the syncer, of their Kubernetes
// nodes).
const (
	// LabelNodeSet names the NodeSet a compute pod belongs to.
	LabelNodeSet = "sunk.dev/nodeset"
	// LabelTemplateHash is the hash of the pod template the pod was made from; a pod whose
	// hash differs from the NodeSet's current one is replaced by an update.
	LabelTemplateHash = "sunk.dev/template-hash"
	// LabelSlurmNode is the Slurm node name of the pod (its host name, and its own name).
	LabelSlurmNode = "sunk.dev/slurm-node"
	// LabelEvictable ("true") is set by the syncer on a compute pod whose Slurm node can
	// neither run a job now nor start one: drained or down, and not busy (Node.Busy), or not
	// registered at all. The NodeSet's PodDisruptionBudget protects every other compute pod,
	// so an eviction (kubectl drain, an autoscaler) waits until the job is done.
	LabelEvictable = "sunk.dev/evictable"
	// FinalizerSlurmNode keeps a compute pod until the NodeSet controller has removed its
	// Slurm node record, when the pod is gone for good (scale-in, node left the selection).
	FinalizerSlurmNode = "sunk.dev/slurm-node"
)

// The NodeSet's own finalizer and the annotation that gives up on it.
const (
	// FinalizerNodeSetDrain holds a deleted NodeSet until its pods are gone the protected way
	// (drain, wait for the jobs, delete), like a scale-in to zero.
	FinalizerNodeSetDrain = "sunk.dev/drain-before-delete"
	// AnnotationForceDelete ("true") on a NodeSet being deleted drops FinalizerNodeSetDrain
	// at once: its pods go with it, running jobs or not. The way out when Slurm is gone. On a
	// SlurmCluster being deleted it drops FinalizerClusterDrain, and its NodeSets follow.
	AnnotationForceDelete = "sunk.dev/force-delete"
	// FinalizerClusterDrain holds a deleted SlurmCluster, and with it slurmctld, until its
	// NodeSets are gone the protected way: it deletes them, they drain and wait for their jobs.
	FinalizerClusterDrain = "sunk.dev/drain-nodesets"
)

// LabelDatabasePassword marks a Secret an admin allows as an external accounting database's
// password (value "true"): a SlurmCluster names the database host, so the operator reads no
// other Secret for it.
const LabelDatabasePassword = "sunk.dev/database-password"

// Annotations the operator writes on the control plane's pods.
const (
	// AnnotationRestartHash on a pod template rolls the pods when settings change that only a
	// restart applies.
	AnnotationRestartHash = "sunk.dev/restart-hash"
	// AnnotationConfigHash on a slurmctld pod is the config it should see; writing it also
	// makes kubelet refresh the pod's ConfigMap volumes promptly. On a config check pod it is
	// the config the pod checks. Its value is the hash render writes on slurm.conf's first line
	// (render.ConfigHashLine). The sunk chart's checksum that rolls sunk-scheduler is another
	// thing under another key (sunk.dev/scheduler-config-checksum).
	AnnotationConfigHash = "sunk.dev/config-hash"
	// AnnotationJWTKey on a slurmctld pod names (by a hash prefix, not the key) the JWT key it
	// should load; writing it makes kubelet refresh the pod's key volume promptly.
	AnnotationJWTKey = "sunk.dev/jwt-key"

	// AnnotationAuthKeyID on a SlurmCluster is the admin's request: the id (kid) of the auth key
	// every daemon should sign with. A new id starts a rotation of the auth key ring in the
	// cluster's auth Secret (docs/security.md, "Rotating keys").
	AnnotationAuthKeyID = "sunk.dev/auth-key-id"
	// AnnotationAuthKeyDeadline on a SlurmCluster bounds how long a rotation waits for the jobs
	// that started under the old ring (a Go duration, "24h"): once the rotation has waited that
	// long past the tokens' lifetime, the operator requeues them (`scontrol requeue`; a job
	// Slurm will not requeue, --no-requeue, is cancelled) so that the old key can leave the
	// ring. Without it the rotation waits for them however long they run: one job of
	// --time=UNLIMITED would keep a leaked key valid for ever.
	AnnotationAuthKeyDeadline = "sunk.dev/auth-key-deadline"
	// AnnotationAuthRingWritten and AnnotationAuthRingLoaded on the auth Secret are the
	// operator's record of a rotation: when it last wrote slurm.jwks (RFC 3339), and which
	// ring (ID@RFC 3339, a hash prefix of the file) every daemon had loaded, and when.
	AnnotationAuthRingWritten = "sunk.dev/auth-ring-written"
	AnnotationAuthRingLoaded  = "sunk.dev/auth-ring-loaded"
	// AnnotationAuthRing on a pod that holds the auth key names (by a hash prefix) the ring it
	// should see; writing it also makes kubelet refresh the pod's volumes now.
	AnnotationAuthRing = "sunk.dev/auth-ring"
)

// The syncer's protocol on Kubernetes objects (docs/syncer.md).
const (
	// AnnotationCordonReason on a Kubernetes node says why it was cordoned; it becomes part
	// of the Slurm drain reason.
	AnnotationCordonReason = "sunk.dev/cordon-reason"
	// AnnotationSlurmState and AnnotationSlurmReason mirror the Slurm node on its pod and its
	// Kubernetes node.
	AnnotationSlurmState  = "slurm.sunk.dev/state"
	AnnotationSlurmReason = "slurm.sunk.dev/reason"
	// AnnotationSlurmJobs on a compute pod lists the Slurm jobs running on its Slurm node:
	// job ids, ascending, comma-separated; absent when none.
	AnnotationSlurmJobs = "slurm.sunk.dev/jobs"
	// ConditionSlurmNode is the pod and node condition: True when Slurm may run jobs there.
	ConditionSlurmNode = "sunk.dev/SlurmNodeAvailable"
	// ReasonSlurmNodeNotRegistered is that condition's reason (False) while Slurm has no node
	// of the pod's name: its slurmd has not registered yet, or slurmctld lost the record.
	ReasonSlurmNodeNotRegistered = "NotRegistered"
)

// Annotations a pod scheduled by sunk-scheduler sets to shape its Slurm job (all optional),
// and the scheduler's own marks (docs/scheduler.md).
const (
	AnnotationPartition   = "sunk.dev/partition"
	AnnotationAccount     = "sunk.dev/account"
	AnnotationQOS         = "sunk.dev/qos"
	AnnotationPriority    = "sunk.dev/priority"   // unsigned integer
	AnnotationTimeLimit   = "sunk.dev/time-limit" // Go duration ("90m") or minutes ("90")
	AnnotationReservation = "sunk.dev/reservation"
	AnnotationExclusive   = "sunk.dev/exclusive" // "true" (default) or "false"
	AnnotationConstraint  = "sunk.dev/constraint"
	// AnnotationGang names a gang: the pods of one namespace that share it become one job of
	// AnnotationGangSize nodes, one pod per node, bound all or nothing.
	AnnotationGang     = "sunk.dev/gang"
	AnnotationGangSize = "sunk.dev/gang-size"
	// AnnotationJob is written by the scheduler on a pod it binds: the Slurm job it runs in.
	AnnotationJob = "sunk.dev/slurm-job"
	// TaintJob is the node lock: while an exclusive placeholder job runs on a node, the node
	// carries this NoSchedule taint (value: the job id), so that ordinary pods are kept away.
	TaintJob = "sunk.dev/slurm-job"
)

// Drain reasons: who set a Slurm drain is told by its reason's prefix. A drain whose reason
// does not start with DrainPrefix was set by a person (or by Slurm itself), and no sunk
// component ever lifts or rewrites it.
const (
	// DrainPrefix starts every drain reason a sunk component sets.
	DrainPrefix = "k8s:"
	// DrainPrefixNodeSet starts the NodeSet controller's drains (scale-in, update); only the
	// NodeSet controller lifts them.
	DrainPrefixNodeSet = DrainPrefix + " nodeset"
)

// DrainBySunk reports a drain reason set by any sunk component.
func DrainBySunk(reason string) bool { return strings.HasPrefix(reason, DrainPrefix) }

// DrainByNodeSet reports a drain reason set by the NodeSet controller.
func DrainByNodeSet(reason string) bool { return strings.HasPrefix(reason, DrainPrefixNodeSet) }

// DrainBySyncer reports a drain reason set by the syncer: sunk's, not the NodeSet controller's.
func DrainBySyncer(reason string) bool { return DrainBySunk(reason) && !DrainByNodeSet(reason) }

// GPUs as Kubernetes knows them: the NVIDIA device plugin's extended resource, and the
// product label GPU Feature Discovery puts on a node ("NVIDIA-H100-80GB-HBM3").
const (
	ResourceGPU     = "nvidia.com/gpu"
	LabelGPUProduct = "nvidia.com/gpu.product"
)

// ParkedPrefix starts the Slurm node comment of a record the NodeSet autoscaler parked: the
// node has no pod, Slurm keeps it in state FUTURE so that jobs may pend for it, and the rest of
// the comment is the template hash of the pod that registered it (a record of an older
// template is removed, and registered afresh). The syncer leaves parked records alone.
const ParkedPrefix = "sunk-parked template="

// Parked reports a Slurm node record the NodeSet autoscaler parked.
func Parked(baseState, comment string) bool {
	return baseState == "FUTURE" && strings.HasPrefix(comment, ParkedPrefix)
}

// SlurmNodeOf is the Slurm node name of a compute pod with these labels and this name: its
// LabelSlurmNode, or (a pod from before the label) the pod's own name.
func SlurmNodeOf(labels map[string]string, podName string) string {
	if n := labels[LabelSlurmNode]; n != "" {
		return n
	}
	return podName
}
