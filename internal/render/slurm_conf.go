// slurm.conf itself: the parameters sunk sets and why, and the partitions.

package render

import (
	"fmt"
	"slices"
	"strings"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// SchedulerParameters sunk renders, each option with its reason (Slurm 24.11 defaults in
// parentheses). docs/slurmcluster.md explains them for admins; an extraConf
// SchedulerParameters line replaces the whole list.
var schedulerParameters = []string{
	// sbatch never starts a job inside the submit RPC (job_allocate tests only): a batch job,
	// like a node that registers or is resumed, queues a scheduling request that slurmctld's
	// once-a-second background loop serves only batch_sched_delay after the last pass (3 s).
	// With 0 the next tick serves it.
	"batch_sched_delay=0",
	// Every node of a finished job sends an epilog-complete that asks for a pass, and by
	// default passes may follow 2 µs apart: 0.1 s between passes merges such bursts and
	// leaves the job lock to RPCs (REST pollers among them), adding at most 0.1 s to a start.
	"sched_min_interval=100000",
	// The full-queue pass (60 s) starts what no event asked for: jobs deeper than
	// default_queue_depth (100), nodes that answer pings again. The ~60 s wait seen for a
	// batch job on idle nodes matches it. One pass is capped at max_sched_time (2 s).
	"sched_interval=10",
	// Backfill starts the jobs that strict priority order passes over (a small job behind a
	// big pending one): every 10 s (30 s), without giving up its cycle whenever job or node
	// state changes while it yields its locks (sunk changes node state all the time), and
	// 1000 jobs deep (500) so a queue of a few hundred nodes' work is looked at whole.
	"bf_continue",
	"bf_interval=10",
	"bf_max_job_test=1000",
	// Both schedulers stand back while 150 or more RPCs are in progress (off), so that a
	// burst of clients is answered first; the middle of the 256 RPC threads, as Slurm advises.
	"max_rpc_cnt=150",
	// Dynamic nodes come and go with their pods: a job whose --constraint names a feature no
	// registered node has right now (a NodeSet at 0, pods still starting) pends until one
	// does instead of being rejected (the price: a misspelt feature pends too).
	"ignore_constraint_validation",
}

// productionDefaults are the slurm.conf settings sunk chooses for dynamic nodes in pods
// instead of Slurm's defaults. controller.extraConf replaces any of them by key.
var productionDefaults = []string{
	"SchedulerParameters=" + strings.Join(schedulerParameters, ","),
	// slurmctld pings every node each SlurmdTimeout/3 and each answer bumps the node
	// table's update time, so every REST poller then reads the whole node list: with 300
	// (Slurm's default) that is every 100 s instead of every 20 s. Kubernetes, through
	// sunk-syncer's drains, notices a lost pod long before; Slurm's own DOWN (which kills
	// the node's jobs) must not fire on a slurmctld or network hiccup.
	"SlurmdTimeout=300",
	// A pod that comes back registers again; whatever set its node DOWN (not responding,
	// "unexpectedly rebooted"), it returns to service. Drains are a flag, not DOWN: they stay.
	"ReturnToService=2",
	// Finished jobs stay in slurmctld this long (300 s), and every job list sunk polls
	// carries them (about 5.5 KB each). Two minutes is ample for sunk-scheduler to see a
	// job's end, also across its own restart; sacct keeps the history.
	"MinJobAge=120",
	// Round trip of one RPC (Slurm's default, written out because the rest depends on it):
	// also how long a slurmrestd thread waits on slurmctld, and half of it, at most 2 s, is
	// max_sched_time.
	"MessageTimeout=10",
	// How long a batch job's launch may take before a registration of its node that does not
	// list it requeues it as lost ("missing from batch node", src/slurmctld/job_mgr.c
	// _purge_missing_jobs: BatchStartTimeout plus MessageTimeout after the start). Slurm's 10 s
	// is short for a slurmd in a pod on a busy Kubernetes node: in a soak on 2 cores a job whose
	// launch took 22 s, while 37 compute pods started beside it, was requeued so. A launch that
	// really was lost is found 50 s later, at the node's next registration.
	"BatchStartTimeout=60",
	// Connect timeout (2 s): a SYN lost while a new pod's network is programmed is resent
	// after 1 s and 3 s; 5 s survives both and stays half of MessageTimeout.
	"TCPTimeout=5",
	// SIGTERM to SIGKILL on scancel, time limit and preemption (Slurm's default): also
	// about the longest a sunk-scheduler pod that preempts a job waits for its node.
	"KillWait=30",
	// A step still alive this long after SIGKILL drains the node "Kill task failed" (60 s).
	// GPU processes releasing device memory and tasks stuck on network file systems take
	// longer than a minute; a false drain costs a node until someone resumes it. At least
	// 5 x MessageTimeout, as Slurm requires.
	"UnkillableStepTimeout=180",
}

// SlurmctldTimeout (seconds) is how long a backup slurmctld (controller.backup) waits after the
// primary's last answer to its pings, sent every third of it, and the primary's last heartbeat
// on the shared state volume before it takes over (src/slurmctld/backup.c run_backup). Slurm's
// default is 120; 30 keeps the cluster without a controller for well under a minute, and still
// long beyond a slurmctld busy with a large reconfigure. Clients wait through the gap: they
// retry a standby controller for up to 1.5 times this.
const SlurmctldTimeout = 30

// QuiesceTimeout (seconds) is 26.05's conmgr_quiesce_timeout. A backup slurmctld told
// REQUEST_CONTROL quiesces its connection manager while the RPC's own handler holds a worker
// for up to CONTROL_TIMEOUT-1 = 29 s (src/slurmctld/proc_req.c _slurm_rpc_request_control,
// controller.c _slurmctld_background), so Slurm's default, 2 x MessageTimeout = 20 s, always
// expires during a hand-back. From then on conmgr interrupts its own poll on every pass
// (src/conmgr/watch.c _quiesce_max_sleep) and never reads its signal pipe again, while a
// signal waiting there defers the quiesce: one signal in that window (a SIGCHLD is enough)
// spins the backup at 100% CPU for good, deaf even to SIGTERM, and the returning primary times
// out on it. Longer than CONTROL_TIMEOUT, the quiesce ends before the timeout fires, and
// connections still stop within their own read and write timeouts (MessageTimeout).
const QuiesceTimeout = 60

// slurmctldParameters is the SlurmctldParameters line.
func slurmctldParameters(in ConfigInputs) string {
	p := "SlurmctldParameters=enable_configless"
	if in.QuiesceTimeout {
		p += fmt.Sprintf(",conmgr_quiesce_timeout=%d", QuiesceTimeout)
	}
	return p
}

func slurmConf(sc *sunkv1.SlurmCluster, in ConfigInputs) string {
	n := in.Names
	var ctld []string
	for i := 0; i < Controllers(sc); i++ {
		ctld = append(ctld, fmt.Sprintf("SlurmctldHost=%s(%s)", n.ControllerPod(i), n.ControllerAddr(i, Controllers(sc))))
	}
	lines := []string{
		"ClusterName=" + sc.SlurmName(),
	}
	lines = append(lines, ctld...)
	lines = append(lines,
		fmt.Sprintf("SlurmctldPort=%d", clusternames.SlurmctldPort),
		fmt.Sprintf("SlurmdPort=%d", clusternames.SlurmdPort),
		"SlurmUser=slurm",
		"SlurmdUser=root",
		"AuthType=auth/slurm",
		"CredType=cred/slurm",
		"AuthAltTypes=auth/jwt",
		"AuthAltParameters=jwt_key="+KeysMountDir+"/"+wellknown.SecretJWTKey,
		// configless: slurmd and sackd fetch this file from slurmctld. (24.11 takes a dynamic
		// node's address from where it registers; cloud_reg_addrs is defunct and logs an error.)
		slurmctldParameters(in),
		"StateSaveLocation="+StateSaveDir,
		"SlurmdSpoolDir=/var/spool/slurmd",
		"SlurmctldPidFile=/run/slurmctld.pid",
		"SlurmdPidFile=/run/slurmd.pid",
		"ProctrackType=proctrack/cgroup",
		"TaskPlugin=task/cgroup,task/affinity",
		"JobAcctGatherType=jobacct_gather/linux",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_Core_Memory",
		"GresTypes=gpu",
		// Dynamic nodes: slurmctld cannot know their addresses ahead, so no message fan-out.
		"TreeWidth=65533",
		"MaxNodeCount=1024",
		fmt.Sprintf("SlurmctldTimeout=%d", SlurmctldTimeout),
		"MpiDefault=none",
		// Root's jobs are refused ("Invalid user id"): root in a login pod is Slurm's admin, not a
		// user, and a root job is root on every compute pod's host. Jobs run as the users who
		// submit them; an admin runs one with runuser or su. A partition's DisableRootJobs=NO, or
		// this key in extraConf, allows them again.
		"DisableRootJobs=YES",
	)
	lines = append(lines, productionDefaults...)
	if len(in.Prolog) > 0 {
		lines = append(lines, "Prolog="+ScriptsDir+"/prolog")
	}
	if len(in.Epilog) > 0 {
		lines = append(lines, "Epilog="+ScriptsDir+"/epilog")
	}
	if pr := sc.Spec.Preemption; pr.Type != "" && pr.Type != sunkv1.PreemptionNone {
		mode := pr.Mode
		if mode == "" {
			mode = sunkv1.PreemptionCancel
		}
		lines = append(lines, "PreemptType=preempt/"+string(pr.Type), "PreemptMode="+string(mode))
		if pr.ExemptTime != "" {
			lines = append(lines, "PreemptExemptTime="+pr.ExemptTime)
		}
	}
	if sc.Spec.JobSubmitLua != "" {
		lines = append(lines, "JobSubmitPlugins=lua")
	}
	if topo, err := topologyOrEmpty(sc, in); err == nil && topo != nil && topo.SlurmPlugin() != "" && !in.TopologyYAML {
		// No restart key: the reconfigure re-executes slurmctld (24.11 and 26.05), which
		// loads the plugin and rereads topology.conf (docs/topology.md).
		lines = append(lines, "TopologyPlugin="+topo.SlurmPlugin())
	}
	if sc.Spec.Accounting.Mode == sunkv1.AccountingManaged || sc.Spec.Accounting.Mode == sunkv1.AccountingExternal {
		lines = append(lines,
			"AccountingStorageType=accounting_storage/slurmdbd",
			"AccountingStorageHost="+n.ServiceHost(n.Accounting),
			fmt.Sprintf("AccountingStoragePort=%d", clusternames.SlurmdbdPort),
			"AccountingStorageTRES="+AccountingTRES(in.GPUTypes),
		)
	}
	conf := mergeConf(strings.Join(lines, "\n")+"\n", sc.Spec.Controller.ExtraConf)
	return conf + partitions(sc, in.TopologyYAML)
}

// AccountingTRES is AccountingStorageTRES: gres/gpu, the GPUs of every type (what sacct and
// sreport show per job and account), then gres/gpu:<type> for each GPU type, sorted. 24.11.5
// records the typed TRES of the GPUs a job was given even when it asked for untyped ones (seen
// in TestJobSeesOnlyItsGPUs; slurm.conf(5) says only typed requests count). gres/gpu also
// makes Slurm track gres/gpumem and gres/gpuutil.
// Rendered only with AccountingStorageType=accounting_storage/slurmdbd: slurmctld 24.11 stops
// on a gres TRES without slurmdbd ("slurmdbd is required to run with TRES gres/gpu", seen).
func AccountingTRES(gpuTypes []string) string {
	tres := []string{"gres/gpu"}
	for _, t := range slices.Compact(slices.Sorted(slices.Values(gpuTypes))) {
		if t != "" {
			tres = append(tres, "gres/gpu:"+t)
		}
	}
	return strings.Join(tres, ",")
}

// partitions renders NodeSet (by Feature, so that dynamic nodes join by their features)
// and PartitionName lines. Without partitions in the spec there is one default "all". A
// partition's topology is Topology= only where Slurm reads topology.yaml (yaml): 24.11 stops
// on the key, and admission refuses it there.
func partitions(sc *sunkv1.SlurmCluster, yaml bool) string {
	var b strings.Builder
	b.WriteString("\n# Partitions\n")
	parts := sc.Spec.EffectivePartitions()
	defaultPartition := sc.Spec.DefaultPartition()
	seen := map[string]bool{}
	for _, p := range parts {
		for _, ns := range p.NodeSets {
			if !seen[ns] {
				seen[ns] = true
				fmt.Fprintf(&b, "NodeSet=%s Feature=%s\n", SlurmNodeSetName(ns), ns)
			}
		}
	}
	for _, p := range parts {
		nodes := "ALL"
		if len(p.NodeSets) > 0 {
			var sets []string
			for _, ns := range p.NodeSets {
				sets = append(sets, SlurmNodeSetName(ns))
			}
			nodes = strings.Join(sets, ",")
		}
		// Without an explicit default the first partition is, as users expect sbatch
		// without -p to work (the one place that decides: DefaultPartition, which
		// sunk-scheduler's policy uses too).
		def := "NO"
		if p.Name == defaultPartition {
			def = "YES"
		}
		maxTime := p.MaxTime
		if maxTime == "" {
			maxTime = "INFINITE"
		}
		line := fmt.Sprintf("PartitionName=%s Nodes=%s Default=%s MaxTime=%s State=UP", p.Name, nodes, def, maxTime)
		if p.PriorityTier != nil {
			line += fmt.Sprintf(" PriorityTier=%d", *p.PriorityTier)
		}
		if yaml && p.Topology != "" && sc.Spec.Topology.Has(p.Topology) {
			// topology.yaml names each topology after its kind (TopologyFile).
			line += " Topology=" + string(p.Topology)
		}
		if p.ExtraConf != "" {
			line += " " + strings.TrimSpace(p.ExtraConf)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// SlurmNodeSetName is the slurm.conf NodeSet of a NodeSet resource; its nodes carry the
// resource's name as a Feature.
func SlurmNodeSetName(nodeSet string) string { return "ns-" + nodeSet }
