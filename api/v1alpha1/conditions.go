// Condition types and condition reasons of sunk's objects.

package v1alpha1

// Condition types of a SlurmCluster.
const (
	ConditionReady           = "Ready"
	ConditionControllerReady = "ControllerReady"
	ConditionRestAPIReady    = "RestApiReady"
	ConditionAccountingReady = "AccountingReady"
	ConditionLoginReady      = "LoginReady"
	ConditionConfigApplied   = "ConfigApplied"
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
)

// Condition reasons that mean the same on a SlurmCluster and a NodeSet; each controller's other
// reasons are its own.
const (
	// ReasonInvalidSpec: the spec fails the admission rules (re-checked by the controller), so
	// nothing is rendered from it.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonReady: the condition holds.
	ReasonReady = "Ready"
)

// Condition types of a NodeSet (besides Ready).
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

// ConditionTopologyReady: True when every compute node sits under a labelled switch or block.
const ConditionTopologyReady = "TopologyReady"
