// Condition types and condition reasons sunk writes. They are a contract with users: alerts,
// scripts and `kubectl wait --for=condition=...` match them, so a value never changes once
// released. A reason that is also an event's says so; reasons only of events are in events.go.

package v1alpha1

// Condition types of a SlurmCluster. Ready sums up the ones before AuthKeyRotated.
const (
	// ConditionReady: every component below serves and slurmctld runs the current configuration.
	ConditionReady = "Ready"
	// ConditionControllerReady: a slurmctld serves (the primary, or the backup in charge).
	ConditionControllerReady = "ControllerReady"
	// ConditionRestAPIReady: at least one slurmrestd pod is available.
	ConditionRestAPIReady = "RestApiReady"
	// ConditionAccountingReady: slurmdbd and the managed database are ready, or accounting is off.
	ConditionAccountingReady = "AccountingReady"
	// ConditionLoginReady: at least one login pod is available, or there are none to run.
	ConditionLoginReady = "LoginReady"
	// ConditionConfigApplied: slurmctld runs the current rendering (status.configHash).
	ConditionConfigApplied = "ConfigApplied"
	// ConditionAuthKeyRotated: every daemon signs with the auth key named by the annotation
	// sunk.dev/auth-key-id, alone in the ring; absent when no rotation was ever asked.
	ConditionAuthKeyRotated = "AuthKeyRotated"
	// ConditionNodesSynced is sunk-syncer's: False while it cannot read Slurm's node state
	// and so changes nothing (not part of Ready).
	ConditionNodesSynced = "NodesSynced"
	// ConditionGPUDevicesIncluded is True while the configuration slurmctld runs
	// (status.configHash) has gres.conf include each compute pod's own GPU device lines: it is
	// set with ConfigApplied=True, and a NodeSet with GPUs creates pods only then, because a
	// slurmd that registers without its device lines reports no GPUs and slurmctld drains its
	// node for good ("gres/gpu count reported lower than configured"). Not part of Ready. A
	// condition rather than a status field: the schema of conditions does not change, so no
	// API server prunes it.
	ConditionGPUDevicesIncluded = "GPUDevicesIncluded"
	// ConditionContainersEnabled is True while the configuration slurmctld runs
	// (status.configHash) has plugstack.conf load sunk's SPANK plugin (a NodeSet enables
	// containers for jobs): set with ConfigApplied=True, and a NodeSet with containers creates
	// pods only then, because a configless slurmd fetches plugstack.conf when it starts and a
	// reconfigure sent before it registered never reaches it: its steps would ignore
	// --container-image and run on the node's own filesystem. Not part of Ready.
	ConditionContainersEnabled = "ContainersEnabled"
	// ConditionSlurmVersion's message is the Slurm release the daemons run ("26.05"); True
	// when every daemon runs spec.slurmVersion. A condition rather than a status field, so
	// that an older CRD installed over this one (which prunes unknown status fields) does not
	// lose it. Not part of Ready.
	ConditionSlurmVersion = "SlurmVersion"
	// ConditionFeaturesAvailable is False (reason OlderSlurm) when the cluster's Slurm lacks
	// features sunk offers on newer releases; its message names them. Not part of Ready.
	ConditionFeaturesAvailable = "FeaturesAvailable"
	// ConditionTopologyReady: True when every compute node sits under a labelled switch or
	// block (with spec.topology only; not part of Ready).
	ConditionTopologyReady = "TopologyReady"
)

// Condition types of a NodeSet (besides Ready, ConditionReady).
const (
	// ConditionSlurmReachable is False when slurmrestd could not be read; the NodeSet then
	// drains, deletes and resumes nothing.
	ConditionSlurmReachable = "SlurmReachable"
	// ConditionNodeConflict is True when Kubernetes nodes the NodeSet selects belong to an
	// older NodeSet of the same cluster, or pod names it needs are taken.
	ConditionNodeConflict = "NodeConflict"
	// ConditionContainerCredentials, on a NodeSet with spec.containers.imagePullSecrets, is
	// False naming each of them that does not exist or is not a dockerconfigjson Secret (the
	// pods mount them and would stay in ContainerCreating), True when all are there.
	ConditionContainerCredentials = "ContainerCredentials"
)

// Condition reasons that mean the same on a SlurmCluster and a NodeSet.
const (
	// ReasonInvalidSpec: the spec fails the admission rules (re-checked by the controller), so
	// nothing is rendered from it (SlurmCluster ConfigApplied, NodeSet Ready; also a Warning
	// event).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonReady: the condition holds (Ready and the component conditions).
	ReasonReady = "Ready"
	// ReasonNoImage: no Slurm image for spec.slurmVersion (no spec.image and none in the
	// operator's --slurm-images): SlurmCluster ConfigApplied (with a Warning event), NodeSet Ready.
	ReasonNoImage = "NoImage"
)

// Reasons of a SlurmCluster's Ready and component conditions (ControllerReady, RestApiReady,
// AccountingReady, LoginReady). Ready=False takes ConfigApplied's reason when that is the only
// blocker.
const (
	// ReasonNotReady: the component's pods are not available (or slurmctld does not answer,
	// without a backup).
	ReasonNotReady = "NotReady"
	// ReasonDisabled: the component is turned off (accounting mode None, login replicas 0),
	// which counts as ready.
	ReasonDisabled = "Disabled"
	// ReasonComponentsNotReady: Ready is False because several conditions are; the message
	// lists them.
	ReasonComponentsNotReady = "ComponentsNotReady"
	// ReasonBackupInCharge: the primary slurmctld is down and the backup serves. The cluster
	// works (ControllerReady and Ready are True) but has lost its spare: an operator must
	// bring the primary back (its node, its pod), after which it takes control back itself.
	// Also a Warning event when it starts.
	ReasonBackupInCharge = "BackupInCharge"
	// ReasonPrimaryDown: the primary slurmctld is down and no controller serves yet; with a
	// backup, it takes over once the primary has been silent for SlurmctldTimeout.
	ReasonPrimaryDown = "PrimaryDown"
)

// Reasons of a SlurmCluster's ConfigApplied (besides InvalidSpec and NoImage).
const (
	// ReasonApplied: slurmctld runs the current configuration (also GPUDevicesIncluded and
	// ContainersEnabled True).
	ReasonApplied = "Applied"
	// ReasonScriptNotFound: a prolog or epilog's ConfigMap or key is missing; the last good
	// scripts stay (also a Warning event).
	ReasonScriptNotFound = "ScriptNotFound"
	// ReasonInvalidScript: a prolog or epilog read from a ConfigMap fails the checks an inline
	// script passes at admission; the last good scripts stay (also a Warning event).
	ReasonInvalidScript = "InvalidScript"
	// ReasonKeyMissing: a key Secret exists without its key, which sunk never replaces (also a
	// Warning event).
	ReasonKeyMissing = "KeyMissing"
	// ReasonTLSFailed: the cluster's TLS Secret cannot be made or renewed (it is not the
	// cluster's, or issuing failed); the message says why (also a Warning event). Nothing is
	// applied until it can: the pods would mount a certificate sunk's clients refuse.
	ReasonTLSFailed = "TLSCertificateFailed"
	// ReasonReconfigureFailed: `scontrol reconfigure` of the new configuration failed (also a
	// Warning event).
	ReasonReconfigureFailed = "ReconfigureFailed"
	// ReasonWaitingForKubelet: the new configuration is written; kubelet has not yet brought
	// it into slurmctld's volume.
	ReasonWaitingForKubelet = "WaitingForConfigVolume"
	// ReasonWaitingForCtld: the slurmctld pod does not exist or is not ready yet.
	ReasonWaitingForCtld = "WaitingForController"
	// ReasonWaitingForRestAPI: slurmrestd, through which the operator reconfigures, is not ready.
	ReasonWaitingForRestAPI = "WaitingForRestApi"
	// ReasonRollingRestart: slurmctld restarts to apply settings a reconfigure cannot.
	ReasonRollingRestart = "RollingRestart"
	// ReasonCheckingConfig: Slurm's own parser checks the new configuration in a short pod
	// (operator.slurmConfigCheck).
	ReasonCheckingConfig = "CheckingConfig"
	// ReasonSlurmRejectedConfig: Slurm's parser refused the new configuration; the message is
	// Slurm's (also a Warning event).
	ReasonSlurmRejectedConfig = "SlurmRejectedConfig"
)

// Reasons of a SlurmCluster's AuthKeyRotated (docs/security.md, "Rotating keys"). Those that
// are also events are recorded when the rotation reaches them.
const (
	// ReasonAuthKeyCurrent: every daemon signs with the asked key, alone in the ring.
	ReasonAuthKeyCurrent = "AuthKeyCurrent"
	// ReasonAuthRingWritten: the operator wrote a new key ring (also a Normal event).
	ReasonAuthRingWritten = "AuthKeyRingWritten"
	// ReasonAuthRingLoading: the daemons have not all loaded the written ring yet.
	ReasonAuthRingLoading = "AuthKeyRingLoading"
	// ReasonAuthRingLoaded: every daemon loaded the ring (also a Normal event).
	ReasonAuthRingLoaded = "AuthKeyRingLoaded"
	// ReasonAuthWaitingForJobs: the old key stays while jobs that started with it may still
	// need their credentials, until the rotation's deadline.
	ReasonAuthWaitingForJobs = "AuthKeyWaitingForCredentials"
	// ReasonAuthOldJobsRequeued: the deadline passed; jobs that started before were requeued
	// (also a Warning event).
	ReasonAuthOldJobsRequeued = "AuthKeyOldJobsRequeued"
	// ReasonAuthKeyRefused: the asked rotation cannot be done; the message says why (also a
	// Warning event).
	ReasonAuthKeyRefused = "AuthKeyRotationRefused"
)

// Reasons of a SlurmCluster's NodesSynced, written by sunk-syncer.
const (
	// ReasonInSync: the syncer reads Slurm's node state.
	ReasonInSync = "InSync"
	// ReasonSlurmUnreadable: the syncer cannot read Slurm's node state and changes nothing
	// (also a Warning event, by sunk-syncer).
	ReasonSlurmUnreadable = "SlurmUnreadable"
)

// Reasons of a SlurmCluster's GPUDevicesIncluded and ContainersEnabled (besides Applied).
const (
	// ReasonNoGPUs: GPUDevicesIncluded is False because no NodeSet of the cluster grants GPUs.
	ReasonNoGPUs = "NoGPUNodeSets"
	// ReasonNoContainers: ContainersEnabled is False because no NodeSet of the cluster enables
	// containers.
	ReasonNoContainers = "NoContainerNodeSets"
)

// Reasons of a SlurmCluster's SlurmVersion and FeaturesAvailable.
const (
	// ReasonCurrent: every Slurm pod of the cluster runs spec.slurmVersion.
	ReasonCurrent = "Current"
	// ReasonUpgrading: some pods still run an older release than spec.slurmVersion (also a
	// Normal event at each step of the upgrade).
	ReasonUpgrading = "Upgrading"
	// ReasonNewestSlurm: the cluster's release has every feature sunk renders.
	ReasonNewestSlurm = "NewestSlurm"
	// ReasonOlderSlurm: the cluster's release lacks features of newer ones (the message names them).
	ReasonOlderSlurm = "OlderSlurm"
)

// Reasons of a SlurmCluster's TopologyReady (docs/topology.md).
const (
	// ReasonTopologyPlaced: every compute node sits under a labelled switch or block.
	ReasonTopologyPlaced = "Placed"
	// ReasonTopologyUnlabelled: some nodes' Kubernetes nodes lack the topology labels; they
	// sit under "unknown".
	ReasonTopologyUnlabelled = "UnlabelledNodes"
	// ReasonTopologyLeftOut: some nodes are in no block (their block is smaller than the base
	// block size).
	ReasonTopologyLeftOut = "NodesLeftOut"
	// ReasonTopologyInvalid: spec.topology cannot be rendered; the message says why.
	ReasonTopologyInvalid = "InvalidTopology"
	// ReasonTopologyMoving: nodes are being moved to new places with topology_str, one step
	// per reconfigure.
	ReasonTopologyMoving = "MovingNodes"
)

// Reasons of a NodeSet's Ready (besides InvalidSpec, NoImage and Ready).
const (
	// ReasonClusterNotFound: the SlurmCluster of spec.clusterRef does not exist or is being
	// deleted.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonSlurmUnreachable: Slurm could not be read or written (also SlurmReachable's
	// reason, and a Warning event when it turns so).
	ReasonSlurmUnreachable = "SlurmUnreachable"
	// ReasonWaitingForJobs: nodes to replace or remove are drained and still run jobs; the
	// message names them.
	ReasonWaitingForJobs = "WaitingForJobs"
	// ReasonWaitingForGPUConfig: the NodeSet's pods have GPUs and slurmctld does not yet run
	// the gres.conf that includes their device lines, so no pod is created.
	ReasonWaitingForGPUConfig = "WaitingForGPUConfig"
	// ReasonWaitingForContainersConfig: the NodeSet enables containers and slurmctld does not
	// yet run the plugstack.conf that loads the plugin, so no pod is created.
	ReasonWaitingForContainersConfig = "WaitingForContainersConfig"
	// ReasonScalingIn: surplus pods are being removed, the protected way.
	ReasonScalingIn = "ScalingIn"
	// ReasonUpdating: pods of an older template are being replaced.
	ReasonUpdating = "Updating"
	// ReasonProgressing: desired pods are not all Ready yet.
	ReasonProgressing = "Progressing"
)

// Reasons of a NodeSet's SlurmReachable (besides SlurmUnreachable), NodeConflict and
// ContainerCredentials.
const (
	// ReasonReachable: slurmrestd answered.
	ReasonReachable = "Reachable"
	// ReasonNodeHeld: NodeConflict is True: selected nodes are held by an older NodeSet, or
	// pods the NodeSet needs belong to another owner (also a Warning event).
	ReasonNodeHeld = "NodeHeldByOlderNodeSet"
	// ReasonNoConflict: NodeConflict is False.
	ReasonNoConflict = "NoConflict"
	// ReasonSecretsFound: every Secret of spec.containers.imagePullSecrets is there.
	ReasonSecretsFound = "SecretsFound"
	// ReasonSecretMissing: some of them are missing or not dockerconfigjson; the message names
	// them (also a Warning event).
	ReasonSecretMissing = "SecretMissing"
)

// Reasons of the condition sunk-syncer puts on every compute pod and its Kubernetes node
// (wellknown.ConditionSlurmNode, "sunk.dev/SlurmNodeAvailable"). Besides these, the reason is
// the Slurm node's state in CamelCase ("Idle", "Allocated", "Down", "NotResponding", ...).
const (
	// ReasonMirrorDrained: the Slurm node is drained and empty.
	ReasonMirrorDrained = "Drained"
	// ReasonMirrorDraining: the Slurm node is draining: it still runs jobs, or sunk cannot
	// tell that it is empty.
	ReasonMirrorDraining = "Draining"
	// ReasonMirrorUnknown: the Slurm node reports no state.
	ReasonMirrorUnknown = "Unknown"
)

// Reasons of a pod's PodScheduled condition written by sunk-scheduler (besides Kubernetes'
// Unschedulable, which carries Slurm's pending reason).
const (
	// ReasonPolicyDenied: the pod's Slurm job is outside its namespace's scheduler policy;
	// no job is submitted (also a Warning event).
	ReasonPolicyDenied = "SlurmPolicyDenied"
)
