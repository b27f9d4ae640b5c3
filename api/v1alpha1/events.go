// Event reasons sunk records, by the object they are recorded on. They are a contract with
// users: alerts, scripts and `kubectl get events --field-selector reason=...` match them, so a
// value never changes once released. Condition reasons that are also recorded as events
// (InvalidSpec, BackupInCharge, SlurmUnreachable, ...) are in conditions.go.

package v1alpha1

// Event reasons on a SlurmCluster, by the operator.
const (
	// ReasonUnsafeConfKeys (Warning): spec.controller.unsafeConfKeys lets extraConf set keys
	// that guard sunk's invariants; recorded when the list in use changes.
	ReasonUnsafeConfKeys = "UnsafeConfKeys"
	// ReasonKeyCreated: the operator generated a key (auth, JWT, SSH host) into its Secret.
	ReasonKeyCreated = "KeyCreated"
	// ReasonKeyAdopted: a key Secret that existed before the cluster was taken up and labelled
	// as the cluster's.
	ReasonKeyAdopted = "KeyAdopted"
	// ReasonReconfigured: slurmctld was reconfigured with a new configuration.
	ReasonReconfigured = "Reconfigured"
	// ReasonUpgraded: the last tier of a Slurm upgrade runs spec.slurmVersion (each step
	// before is an Upgrading event).
	ReasonUpgraded = "Upgraded"
	// ReasonJWTKeyLoaded: slurmctld accepts a new JWT key.
	ReasonJWTKeyLoaded = "JWTKeyLoaded"
	// ReasonJWTKeyPending: slurmctld refused a new JWT key; it was reconfigured to load it.
	ReasonJWTKeyPending = "JWTKeyPending"
	// ReasonJWTKeyUnusable (Warning): slurmctld refuses the JWT key and no previous key is left
	// to reach it with; the message says how to recover.
	ReasonJWTKeyUnusable = "JWTKeyUnusable"
	// ReasonJWTKeyPrevious: slurmctld accepts the new JWT key, so the previous one was dropped
	// from the Secret.
	ReasonJWTKeyPrevious = "JWTPreviousKeyDropped"
	// ReasonTopologyMoved: topology_str moved a node to its new place.
	ReasonTopologyMoved = "TopologyMoved"
	// ReasonTopologyMoveFailed (Warning): moving a node with topology_str failed; it is retried.
	ReasonTopologyMoveFailed = "TopologyMoveFailed"
	// ReasonTLSIssued: the operator issued the cluster's serving certificate (and, when the
	// message says so, a new CA) into its TLS Secret; the message says why (spec.tls).
	ReasonTLSIssued = "TLSCertificateIssued"
	// ReasonDeletingNodeSets: the deleted SlurmCluster deletes its NodeSets first, which drain
	// their nodes after their jobs.
	ReasonDeletingNodeSets = "DeletingNodeSets"
)

// Event reasons on a SlurmCluster of its PerUser login pools (spec.login.pools), by the operator.
const (
	// ReasonLoginUserAdded: a member of a pool's group got a login pod.
	ReasonLoginUserAdded = "LoginUserAdded"
	// ReasonLoginUserLeaving: a user left a pool's group; their pod goes after the grace period.
	ReasonLoginUserLeaving = "LoginUserLeaving"
	// ReasonLoginUserRemoved: the pod of a user who left was deleted (or their pool was).
	ReasonLoginUserRemoved = "LoginUserRemoved"
	// ReasonLoginPoolRemoved: a Group pool's pods were deleted with the pool.
	ReasonLoginPoolRemoved = "LoginPoolRemoved"
	// ReasonLoginUserRefused (Warning): a member of a pool's group gets no pod; the message
	// says which directory attribute is missing or unsafe (a uid below 1000, a ':' in a name).
	ReasonLoginUserRefused = "LoginUserRefused"
	// ReasonDirectoryUnreadable (Warning): the directory could not be read; every pool keeps
	// the pods it has until it can be (a misread member list must not delete anyone's pod).
	ReasonDirectoryUnreadable = "DirectoryUnreadable"
)

// Event reasons of the finalizers of a deleted SlurmCluster or NodeSet.
const (
	// ReasonReleased: the finalizer let go after its work (every node drained after its jobs).
	ReasonReleased = "Released"
	// ReasonForceDeleted (Warning): the finalizer let go at once, without waiting for jobs,
	// because a person asked (the annotation sunk.dev/force-delete).
	ReasonForceDeleted = "ForceDeleted"
)

// Event reasons on a NodeSet (and, for SlurmNodeNotRemoved, on a stopped compute pod), by the
// operator.
const (
	// ReasonPodCreated: a compute pod was created.
	ReasonPodCreated = "PodCreated"
	// ReasonGPUTypeUnusable (Warning): the GPU type of a pod's node cannot be a GRES type; the
	// pod gets untyped GPUs.
	ReasonGPUTypeUnusable = "GPUTypeUnusable"
	// ReasonDrained: the NodeSet drained a Slurm node to replace or remove its pod.
	ReasonDrained = "Drained"
	// ReasonPodDeleted: a compute pod was deleted; the message says why it was safe.
	ReasonPodDeleted = "PodDeleted"
	// ReasonResumed: the NodeSet resumed a drained Slurm node whose pod it keeps.
	ReasonResumed = "Resumed"
	// ReasonRecordRemoved: a Slurm node's record was removed with its pod (or a parked one the
	// autoscaler no longer keeps).
	ReasonRecordRemoved = "SlurmNodeRemoved"
	// ReasonRecordNotRemoved (Warning): removing a Slurm node's record failed; its pod is kept
	// until it succeeds.
	ReasonRecordNotRemoved = "SlurmNodeNotRemoved"
	// ReasonRecordKept: a Slurm node drained by someone else was kept for its replacement pod.
	ReasonRecordKept = "SlurmNodeKept"
	// ReasonScaledUp: the autoscaler raised spec.replicas (or started nodes once to register
	// their shape); the message says why.
	ReasonScaledUp = "ScaledUp"
	// ReasonScaledDown: the autoscaler lowered spec.replicas for idle nodes.
	ReasonScaledDown = "ScaledDown"
	// ReasonParked: a Slurm node without a pod is kept in state FUTURE, so jobs may pend for it.
	ReasonParked = "SlurmNodeParked"
	// ReasonDeleting: the deleted NodeSet's pods are all gone after their jobs.
	ReasonDeleting = "Deleting"
)

// Event reasons on a compute pod, by sunk-syncer (docs/syncer.md).
const (
	// ReasonDrainHeld (Warning): the drain budget holds back the drain of the pod's Slurm node.
	ReasonDrainHeld = "SlurmDrainHeld"
	// ReasonSlurmUpdateFailed (Warning): draining or resuming the pod's Slurm node failed.
	ReasonSlurmUpdateFailed = "SlurmUpdateFailed"
	// ReasonSlurmNodeDrained: the syncer drained the pod's Slurm node for a Kubernetes cause.
	ReasonSlurmNodeDrained = "SlurmNodeDrained"
	// ReasonSlurmNodeResumed: the syncer resumed the pod's Slurm node: no Kubernetes cause is left.
	ReasonSlurmNodeResumed = "SlurmNodeResumed"
)

// Event reasons on a pod scheduled by sunk-scheduler (docs/scheduler.md). The evictions'
// reasons (SlurmJobGone to SlurmJobEnded) are Warnings whose message says why.
const (
	// ReasonSlurmJobSubmitted: the pod's Slurm job was submitted to Slurm's queue.
	ReasonSlurmJobSubmitted = "SlurmJobSubmitted"
	// ReasonSlurmSubmitFailed (Warning): Slurm refused the pod's job.
	ReasonSlurmSubmitFailed = "SlurmSubmitFailed"
	// ReasonSlurmPending: the pod's job pends in Slurm; the message is Slurm's reason.
	ReasonSlurmPending = "SlurmPending"
	// ReasonSlurmAllocated: the pod's job runs; the message names its Slurm node and host.
	ReasonSlurmAllocated = "SlurmAllocated"
	// ReasonSlurmJobCancelled: the pod's job was cancelled because a pod of it was deleted or
	// finished.
	ReasonSlurmJobCancelled = "SlurmJobCancelled"
	// ReasonInvalidAnnotation (Warning): a sunk.dev/ annotation of the pod is malformed.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonInvalidResources (Warning): a GPU quantity of the pod's containers is not a whole
	// number of GPUs.
	ReasonInvalidResources = "InvalidResources"
	// ReasonSlurmJobGone: the bound pod's job is no longer known to Slurm; the pod is evicted.
	ReasonSlurmJobGone = "SlurmJobGone"
	// ReasonSlurmJobStopped: the bound pod's job no longer runs (requeued, suspended); the pod
	// is evicted.
	ReasonSlurmJobStopped = "SlurmJobStopped"
	// ReasonSlurmPreempted: the pod's job was preempted; the pod is evicted.
	ReasonSlurmPreempted = "SlurmPreempted"
	// ReasonSlurmTimeout: the pod's job hit its time limit or deadline; the pod is evicted.
	ReasonSlurmTimeout = "SlurmTimeout"
	// ReasonSlurmNodeFailed: the pod's job ended with a node or boot failure; the pod is evicted.
	ReasonSlurmNodeFailed = "SlurmNodeFailed"
	// ReasonSlurmCancelled: someone else cancelled the pod's job; the pod is evicted.
	ReasonSlurmCancelled = "SlurmCancelled"
	// ReasonSlurmJobEnded: the pod's job ended otherwise (FAILED, COMPLETED, ...); the pod is
	// evicted.
	ReasonSlurmJobEnded = "SlurmJobEnded"
)
