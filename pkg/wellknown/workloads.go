package wellknown

// Keys the controllers of gang workloads write on every pod they make, which sunk-scheduler
// reads to recognise a gang without sunk's own annotations (docs/scheduler.md, "Gangs").
// They are those projects' contracts, copied here rather than imported (their modules would
// bring controller-runtime into the scheduler for a few strings): a new version of a
// controller that renames one breaks recognition, so each block names the version read. The
// end-to-end test bed runs the controllers of exactly these versions
// (hack/workload-controllers.sh; TestWorkloadVersionsAreTheTestBeds holds them equal).

// LeaderWorkerSet (sigs.k8s.io/lws v0.7.0, api/leaderworkerset/v1/leaderworkerset_types.go).
// A group is one leader pod (worker index 0, from the LWS's StatefulSet) and size-1 workers
// (from a StatefulSet per group): all carry the set's name and the group index as labels, and
// the group's size as an annotation. The group index of the leader is written by LWS's pod
// webhook; the workers get it from their StatefulSet's template.
const (
	LWSLabelName        = "leaderworkerset.sigs.k8s.io/name"        // SetNameLabelKey
	LWSLabelGroupIndex  = "leaderworkerset.sigs.k8s.io/group-index" // GroupIndexLabelKey
	LWSLabelWorkerIndex = "leaderworkerset.sigs.k8s.io/worker-index"
	LWSAnnotationSize   = "leaderworkerset.sigs.k8s.io/size" // SizeAnnotationKey: leader + workers
)

// JobSet (sigs.k8s.io/jobset v0.10.1, api/jobset/v1alpha2/jobset_types.go and
// pkg/constants; written by labelAndAnnotateObject in pkg/controllers/jobset_controller.go on
// each child Job and its pod template, as labels and as annotations alike). A replicated job of
// R replicas (the replicas label) is R batch/v1 Jobs of one template, numbered by the job
// index; the pods do not carry their Job's parallelism. The restart attempt is the JobSet's
// status.restarts when the Job was made: a restarted JobSet's Jobs and pods carry the next.
const (
	JobSetLabelName                  = "jobset.sigs.k8s.io/jobset-name"            // JobSetNameKey
	JobSetLabelReplicatedJob         = "jobset.sigs.k8s.io/replicatedjob-name"     // ReplicatedJobNameKey
	JobSetLabelReplicatedJobReplicas = "jobset.sigs.k8s.io/replicatedjob-replicas" // ReplicatedJobReplicas
	JobSetLabelJobIndex              = "jobset.sigs.k8s.io/job-index"              // JobIndexKey
	JobSetLabelRestartAttempt        = "jobset.sigs.k8s.io/restart-attempt"        // constants.RestartsKey
)

// PodGroup of the scheduler-plugins coscheduling plugin (sigs.k8s.io/scheduler-plugins v0.34.7,
// apis/scheduling/v1alpha1/types.go; the CRD in manifests/coscheduling/crd.yaml). A pod names
// its PodGroup, in its own namespace, with the label; the PodGroup's spec.minMember is how many
// of its pods must be scheduled together (at least 1). Unlike the blocks above, the label is
// written by whoever makes the pods (a user, Kubeflow Trainer's coscheduling plugin), and the
// size is on another object, read from the API (group, version and resource below).
const (
	PodGroupLabel    = "scheduling.x-k8s.io/pod-group" // v1alpha1.PodGroupLabel
	PodGroupGroup    = "scheduling.x-k8s.io"           // scheduling.GroupName
	PodGroupVersion  = "v1alpha1"
	PodGroupResource = "podgroups"
)
