package slurm

import (
	"slices"
	"time"
)

// The types below are sunk's own view of Slurm objects. They do not depend on the REST API
// version; the adapter fills them from each version's generated types.

// Node is a Slurm node record.
type Node struct {
	Name     string
	Hostname string
	Address  string
	// State is Slurm's state list: the base state first (IDLE, ALLOCATED, MIXED, DOWN, FUTURE,
	// UNKNOWN, ...), then flags (DRAIN, DYNAMIC_NORM, NOT_RESPONDING, ...).
	State           []string
	Reason          string
	ReasonSetBy     string
	ReasonChangedAt time.Time
	Comment         string
	Extra           string
	Features        []string
	ActiveFeatures  []string
	Partitions      []string
	Gres            string
	GresUsed        string
	// Topology is the node's place in each topology, as Slurm writes topology_str
	// ("tree:spine:leaf,nvl:blk-1"); "" before REST v0.0.43 (Slurm 25.05).
	Topology        string
	CPUs            int
	AllocCPUs       int
	RealMemoryMB    int64
	AllocMemoryMB   int64
	Weight          uint32
	Version         string
	BootTime        time.Time
	SlurmdStartTime time.Time
	LastBusy        time.Time
}

// JobState is one entry of Slurm's job state list (GET /jobs/state): the cheap way to tell which
// jobs changed. ID is Slurm's job id string: a plain number for an ordinary job, "12_3" for an
// array task and "12+1" for a component of a heterogeneous job (neither is that record's ID).
type JobState struct {
	ID    string
	State []string
}

// BaseState is the first entry of State ("" if none).
func (n *Node) BaseState() string {
	if len(n.State) == 0 {
		return ""
	}
	return n.State[0]
}

// HasState reports whether s is the base state or one of the flags.
func (n *Node) HasState(s string) bool { return slices.Contains(n.State, s) }

// Drained reports a node that is draining or drained (the DRAIN flag).
func (n *Node) Drained() bool { return n.HasState("DRAIN") }

// Busy reports a node that runs or finishes jobs, or may: anything but a base state known to
// hold no job (IDLE, DOWN, FUTURE) counts as busy, so that a state sunk does not know never
// lets a component delete a pod or a node record under a job. It is the one answer every sunk
// component uses before removing a node.
func (n *Node) Busy() bool {
	switch n.BaseState() {
	case "IDLE", "DOWN", "FUTURE":
	default:
		return true
	}
	return n.HasState("COMPLETING") || n.HasState("ALLOCATED") || n.HasState("MIXED") || n.AllocCPUs > 0
}

// NodeState is a state to set on a node.
type NodeState string

const (
	NodeStateDrain   NodeState = "DRAIN"
	NodeStateResume  NodeState = "RESUME"
	NodeStateUndrain NodeState = "UNDRAIN"
	NodeStateDown    NodeState = "DOWN"
	NodeStateIdle    NodeState = "IDLE"
	NodeStateFuture  NodeState = "FUTURE"
)

// NodeUpdate changes a node. Nil and empty fields are left as they are. Slurm requires a Reason
// with DRAIN and DOWN.
type NodeUpdate struct {
	State  NodeState
	Reason *string
	// Features sets the available features and, unless ActiveFeatures is given, the active
	// ones too (Slurm refuses active features that are not available: error 2031).
	Features       *[]string
	ActiveFeatures *[]string
	Comment        *string
	Extra          *string
	Weight         *uint32
	Gres           *string
	// Topology is the node's place in the topology (Slurm's topology_str, the Topology= of a
	// node line): "<topology>:<block>" or "<topology>:<switch>:...:<leaf switch>", comma
	// separated for several topologies. REST v0.0.43 and later (Slurm 25.05); UpdateNode
	// refuses it on older versions with ErrUnsupported.
	Topology *string
}

// NodeList is a full list of nodes or, for an incremental list, NotModified.
type NodeList struct {
	Nodes []Node
	// LastUpdate is Slurm's timestamp of this answer; pass it as `since` to the next list.
	LastUpdate time.Time
	// NotModified: Slurm reported no change since `since`; Nodes is empty and means nothing.
	NotModified bool
}

// Job is a Slurm job record.
type Job struct {
	ID        uint32
	Name      string
	UserName  string
	UserID    int
	Account   string
	Partition string
	QOS       string
	// State is Slurm's job state list: base state first (PENDING, RUNNING, COMPLETED, FAILED,
	// CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, ...), then flags (COMPLETING, REQUEUED, ...).
	State            []string
	StateReason      string
	StateDescription string
	Nodes            string // hostlist expression of allocated nodes
	BatchHost        string
	NodeCount        int
	CPUs             int
	CPUsPerTask      int
	MemoryPerNodeMB  int64
	TRESPerNode      string // GRES request, e.g. "gres/gpu:2"
	TRESAlloc        string
	Priority         uint32
	Nice             int
	Hold             bool
	TimeLimit        time.Duration // 0: none / infinite
	Reservation      string
	RequiredNodes    string
	ExcludedNodes    string
	// Features is the job's --constraint expression (ConstraintAdmits reads it).
	Features   string
	Exclusive  bool // always false from v0.0.45, whose answers do not say (a submit's Exclusive still holds)
	Comment    string
	WorkDir    string
	StdOut     string
	ExitCode   int // return code of the batch script, when set
	ExitSignal int
	SubmitTime time.Time
	StartTime  time.Time
	EndTime    time.Time
	// EligibleTime is when the job may start (its begin time; a requeued job's is Slurm's
	// credential lifetime, AuthInfo cred_expire, after the requeue). RestartCount counts its
	// requeues.
	EligibleTime time.Time
	RestartCount int
	// Allocation is what the job holds on each of its nodes, in the order of its node list
	// (job_resources.nodes.allocation; slurmrestd asks slurmctld with SHOW_DETAIL, so both the
	// list and the one-job answer carry it). Empty until the job has nodes.
	Allocation []NodeAllocation
}

// NodeAllocation is a job's share of one node: the CPUs slurmctld gave it there (a whole node's
// for an exclusive job) and the memory.
type NodeAllocation struct {
	Node     string
	CPUs     int
	MemoryMB int64
}

// BaseState is the first entry of State ("" if none).
func (j *Job) BaseState() string {
	if len(j.State) == 0 {
		return ""
	}
	return j.State[0]
}

// HasState reports whether s is the base state or one of the flags.
func (j *Job) HasState(s string) bool { return slices.Contains(j.State, s) }

// JobList is a full list of jobs or, for an incremental list, NotModified.
type JobList struct {
	Jobs        []Job
	LastUpdate  time.Time
	NotModified bool
}

// JobSubmit describes a batch job. Zero values are left to Slurm's defaults.
type JobSubmit struct {
	Name            string
	Script          string // must start with #!
	Partition       string
	Account         string
	QOS             string
	Reservation     string
	Tasks           int
	CPUsPerTask     int
	MinNodes        int
	MaxNodes        int
	MemoryPerNodeMB int64
	// MemoryPerCPUMB is memory per allocated CPU (memory_per_cpu), for jobs whose CPUs per
	// node are Slurm's choice; not with MemoryPerNodeMB.
	MemoryPerCPUMB int64
	// GRES per node in TRES form, e.g. "gres/gpu:2" (or "gpu:2", which is prefixed).
	GRES          string
	Constraints   string // node features
	Priority      *uint32
	Nice          *int
	TimeLimit     time.Duration // rounded up to minutes; 0: partition default
	RequiredNodes []string
	ExcludedNodes []string
	Exclusive     bool
	Hold          bool
	Comment       string
	// Environment of the batch script as KEY=VALUE; slurmrestd requires one, so a minimal PATH is
	// sent when empty.
	Environment []string
	WorkDir     string // default "/tmp"
	StdOut      string
	StdErr      string
}

// SubmitResult is what Slurm says about a submitted job.
type SubmitResult struct {
	JobID   uint32
	Message string // job_submit_user_msg
	// Allocated: the answer to AllocateJob, whose job runs already (a batch job may still pend).
	Allocated bool
}

// JobUpdate changes a job. Nil fields are left as they are.
type JobUpdate struct {
	Priority  *uint32
	Nice      *int
	Hold      *bool // true holds, false releases
	TimeLimit *time.Duration
	Comment   *string
}

// Partition is a Slurm partition.
type Partition struct {
	Name      string
	Nodes     string // hostlist expression
	NodeCount int
	TotalCPUs int
	State     []string      // UP, DOWN, DRAIN, INACTIVE
	MaxTime   time.Duration // 0: infinite
	Priority  int           // priority tier
}

// Reservation is a Slurm reservation.
type Reservation struct {
	Name      string
	Nodes     string
	NodeCount int
	StartTime time.Time
	EndTime   time.Time
	Flags     []string
	Users     string
	Accounts  string
	Partition string
}

// ReservationCreate asks for a reservation (e.g. Flags MAINT, IGNORE_JOBS for maintenance).
type ReservationCreate struct {
	Name      string
	Nodes     []string
	StartTime time.Time
	Duration  time.Duration
	Users     []string
	Accounts  []string
	Flags     []string
	Partition string
}

// ControllerPing is the answer of one slurmctld to a ping.
type ControllerPing struct {
	Hostname   string
	Responding bool
	Primary    bool
	Mode       string // "primary", "backup1", ...; "" from v0.0.45, which no longer reports it
	Latency    time.Duration
}

// Diag is a subset of slurmctld's statistics (sdiag). The counters (jobs submitted, cycles,
// backfilled jobs, ...) and the maxima and means count since ResetTime: slurmctld resets them
// at midnight (and on a restart or `sdiag --reset`).
type Diag struct {
	ServerThreadCount       int
	AgentQueueSize          int
	DBDAgentQueueSize       int
	JobsSubmitted           int
	JobsStarted             int
	JobsCompleted           int
	JobsCanceled            int
	JobsFailed              int
	JobsPending             int
	JobsRunning             int
	ScheduleCycleLast       time.Duration
	ScheduleCycleMax        time.Duration
	ScheduleCycleMean       time.Duration
	ScheduleCycles          int // schedule_cycle_total
	ScheduleCyclesPerMinute int
	ScheduleCycleMeanDepth  int
	ScheduleQueueLength     int
	BackfillActive          bool
	BackfillCycleLast       time.Duration
	BackfillCycleMax        time.Duration
	BackfillCycleMean       time.Duration
	BackfillCycles          int // bf_cycle_counter
	BackfillJobs            int // bf_backfilled_jobs: jobs started by backfill since ResetTime
	BackfillLastJobs        int // bf_last_backfilled_jobs: since the last cycle counters were reset
	BackfillLastDepth       int
	BackfillLastDepthTry    int
	BackfillDepthMean       int
	BackfillQueueLength     int
	BackfillLastCycle       time.Time // zero when no cycle ran
	RequestTime             time.Time
	// ResetTime is when the statistics were last reset (req_time_start).
	ResetTime time.Time
}
