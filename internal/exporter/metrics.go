package exporter

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"sunk.dev/sunk/pkg/slurm"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append([]string{"cluster"}, labels...), nil)
}

// The exporter's own health.
var (
	descUp = desc("slurm_up",
		"1 when the last refresh read every part of Slurm's state (nodes, jobs, partitions, diag); 0 otherwise.")
	descCollectDuration = desc("slurm_exporter_collect_duration_seconds",
		"How long the last refresh of the cluster's snapshot took.")
	descCollectErrors = desc("slurm_exporter_collect_errors_total",
		"Failed reads of a part of Slurm's state (nodes, jobs, partitions, diag).", "part")
	descLastSuccess = desc("slurm_exporter_last_success_timestamp_seconds",
		"When a part of Slurm's state was last read successfully; its values are served until they are older than the stale limit.", "part")
)

// Nodes and their resources.
var (
	descNodes          = desc("slurm_nodes", "Slurm nodes by state (each node once).", "state")
	descPartitionNodes = desc("slurm_partition_nodes", "Slurm nodes of a partition by state.", "partition", "state")
	descNodeInfo       = desc("slurm_node_info",
		"One series per Slurm node (value 1) with its state, Slurm's state flags, partitions, drain reason, and its compute pod's NodeSet and Kubernetes node.",
		"node", "state", "flags", "partitions", "reason", "nodeset", "k8s_node")

	descNodeCPUs          = desc("slurm_node_cpus", "CPUs of a node.", "node")
	descNodeCPUsAlloc     = desc("slurm_node_cpus_allocated", "CPUs of a node allocated to jobs.", "node")
	descNodeCPUsIdle      = desc("slurm_node_cpus_idle", "CPUs of a node that can take jobs and are not allocated (0 on a node that takes no jobs: down, drained, ...).", "node")
	descNodeMemory        = desc("slurm_node_memory_bytes", "Memory of a node (RealMemory).", "node")
	descNodeMemoryAlloc   = desc("slurm_node_memory_allocated_bytes", "Memory of a node allocated to jobs.", "node")
	descNodeMemoryIdle    = desc("slurm_node_memory_idle_bytes", "Memory of a node that can take jobs and is not allocated.", "node")
	descNodeGPUs          = desc("slurm_node_gpus", "GPUs of a node (GRES gpu).", "node")
	descNodeGPUsAlloc     = desc("slurm_node_gpus_allocated", "GPUs of a node allocated to jobs.", "node")
	descNodeGPUsIdle      = desc("slurm_node_gpus_idle", "GPUs of a node that can take jobs and are not allocated.", "node")
	descPartCPUs          = desc("slurm_partition_cpus", "CPUs of a partition's nodes.", "partition")
	descPartCPUsAlloc     = desc("slurm_partition_cpus_allocated", "Allocated CPUs of a partition's nodes.", "partition")
	descPartCPUsIdle      = desc("slurm_partition_cpus_idle", "Idle CPUs of a partition's nodes that can take jobs.", "partition")
	descPartMemory        = desc("slurm_partition_memory_bytes", "Memory of a partition's nodes.", "partition")
	descPartMemoryAlloc   = desc("slurm_partition_memory_allocated_bytes", "Allocated memory of a partition's nodes.", "partition")
	descPartMemoryIdle    = desc("slurm_partition_memory_idle_bytes", "Idle memory of a partition's nodes that can take jobs.", "partition")
	descPartGPUs          = desc("slurm_partition_gpus", "GPUs of a partition's nodes.", "partition")
	descPartGPUsAlloc     = desc("slurm_partition_gpus_allocated", "Allocated GPUs of a partition's nodes.", "partition")
	descPartGPUsIdle      = desc("slurm_partition_gpus_idle", "Idle GPUs of a partition's nodes that can take jobs.", "partition")
	descPartitionInfo     = desc("slurm_partition_info", "One series per partition (value 1) with its state.", "partition", "state")
	descPartitionTotalCPU = desc("slurm_partition_configured_cpus", "CPUs of a partition as slurmctld counts them (its TotalCPUs).", "partition")
)

// Jobs.
var (
	descJobs        = desc("slurm_jobs", "Jobs slurmctld knows (finished ones until MinJobAge purges them) by partition and base state.", "partition", "state")
	descJobsCPUs    = desc("slurm_jobs_cpus", "CPUs of jobs (allocated, or requested while pending) by partition and base state.", "partition", "state")
	descJobsPending = desc("slurm_jobs_pending", "Pending jobs by partition and Slurm's reason.", "partition", "reason")
	descUserJobs    = desc("slurm_user_jobs", "Jobs by user and base state (only with per-user series enabled).", "user", "state")
	descUserCPUs    = desc("slurm_user_jobs_cpus", "CPUs of jobs by user and base state (only with per-user series enabled).", "user", "state")
	descAcctJobs    = desc("slurm_account_jobs", "Jobs by account and base state (only with per-user series enabled).", "account", "state")
	descAcctCPUs    = desc("slurm_account_jobs_cpus", "CPUs of jobs by account and base state (only with per-user series enabled).", "account", "state")
)

// slurmctld's statistics (GET /diag/). Counters, maxima and means are since the last reset
// (slurmctld resets them at midnight): gauges, with the reset time.
var (
	descDiagReset         = desc("slurm_diag_reset_timestamp_seconds", "When slurmctld last reset its statistics (daily at midnight, on restart and by sdiag --reset); every *_since_reset and mean or max value counts from here.")
	descServerThreads     = desc("slurm_scheduler_server_threads", "slurmctld's server threads.")
	descAgentQueue        = desc("slurm_scheduler_agent_queue_size", "RPCs queued by slurmctld's agent.")
	descDBDAgentQueue     = desc("slurm_scheduler_dbd_agent_queue_size", "Messages queued for slurmdbd.")
	descSchedJobs         = desc("slurm_scheduler_jobs_since_reset", "Jobs by event since the statistics' reset: submitted, started, completed, canceled, failed.", "event")
	descSchedCycleLast    = desc("slurm_scheduler_cycle_last_seconds", "Duration of the main scheduler's last cycle.")
	descSchedCycleMax     = desc("slurm_scheduler_cycle_max_seconds", "Longest main scheduler cycle since the reset.")
	descSchedCycleMean    = desc("slurm_scheduler_cycle_mean_seconds", "Mean main scheduler cycle since the reset.")
	descSchedCycles       = desc("slurm_scheduler_cycles_since_reset", "Main scheduler cycles since the reset.")
	descSchedCyclesPerMin = desc("slurm_scheduler_cycles_per_minute", "Main scheduler cycles per minute since the reset.")
	descSchedMeanDepth    = desc("slurm_scheduler_cycle_mean_depth", "Mean number of jobs the main scheduler looked at per cycle.")
	descSchedQueue        = desc("slurm_scheduler_queue_length", "Jobs pending in the main scheduler's queue.")
	descBFActive          = desc("slurm_backfill_active", "1 while a backfill cycle runs.")
	descBFCycleLast       = desc("slurm_backfill_cycle_last_seconds", "Duration of the last backfill cycle.")
	descBFCycleMax        = desc("slurm_backfill_cycle_max_seconds", "Longest backfill cycle since the reset.")
	descBFCycleMean       = desc("slurm_backfill_cycle_mean_seconds", "Mean backfill cycle since the reset.")
	descBFCycles          = desc("slurm_backfill_cycles_since_reset", "Backfill cycles since the reset.")
	descBFJobs            = desc("slurm_backfill_jobs_since_reset", "Jobs started by backfill since the reset.")
	descBFLastJobs        = desc("slurm_backfill_last_jobs", "Jobs started by backfill since the last backfill statistics reset (sdiag's 'Last cycle' counters).")
	descBFLastDepth       = desc("slurm_backfill_last_depth", "Jobs the last backfill cycle looked at.")
	descBFLastDepthTry    = desc("slurm_backfill_last_depth_try", "Jobs the last backfill cycle tried to start.")
	descBFDepthMean       = desc("slurm_backfill_depth_mean", "Mean jobs a backfill cycle looked at since the reset.")
	descBFQueue           = desc("slurm_backfill_queue_length", "Jobs pending for backfill in the last cycle.")
	descBFLastCycle       = desc("slurm_backfill_last_cycle_timestamp_seconds", "When the last backfill cycle ran (absent before the first).")
)

var allDescs = []*prometheus.Desc{
	descUp, descCollectDuration, descCollectErrors, descLastSuccess,
	descNodes, descPartitionNodes, descNodeInfo,
	descNodeCPUs, descNodeCPUsAlloc, descNodeCPUsIdle, descNodeMemory, descNodeMemoryAlloc, descNodeMemoryIdle,
	descNodeGPUs, descNodeGPUsAlloc, descNodeGPUsIdle,
	descPartCPUs, descPartCPUsAlloc, descPartCPUsIdle, descPartMemory, descPartMemoryAlloc, descPartMemoryIdle,
	descPartGPUs, descPartGPUsAlloc, descPartGPUsIdle, descPartitionInfo, descPartitionTotalCPU,
	descJobs, descJobsCPUs, descJobsPending, descUserJobs, descUserCPUs, descAcctJobs, descAcctCPUs,
	descDiagReset, descServerThreads, descAgentQueue, descDBDAgentQueue, descSchedJobs,
	descSchedCycleLast, descSchedCycleMax, descSchedCycleMean, descSchedCycles, descSchedCyclesPerMin,
	descSchedMeanDepth, descSchedQueue, descBFActive, descBFCycleLast, descBFCycleMax, descBFCycleMean,
	descBFCycles, descBFJobs, descBFLastJobs, descBFLastDepth, descBFLastDepthTry, descBFDepthMean,
	descBFQueue, descBFLastCycle,
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// label makes s a valid label value: Prometheus accepts any UTF-8 (the exposition format
// escapes quotes, backslashes and newlines), so only bytes that are not UTF-8 are replaced,
// each by its \xNN spelling. Callers key their maps by the result, so two names that come out
// the same share one series instead of breaking the scrape with a duplicate.
func label(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// JobState is the state a job is counted under: its base state in lower case.
func JobState(j *slurm.Job) string {
	if j.BaseState() == "" {
		return "unknown"
	}
	return strings.ToLower(j.BaseState())
}

func jobMetrics(cluster string, jobs []slurm.Job, perUser bool) []prometheus.Metric {
	cl := label(cluster)
	count, cpus := map[pair]float64{}, map[pair]float64{}
	pending := map[pair]float64{}
	userJobs, userCPUs := map[pair]float64{}, map[pair]float64{}
	acctJobs, acctCPUs := map[pair]float64{}, map[pair]float64{}
	for i := range jobs {
		j := &jobs[i]
		state, part := JobState(j), label(j.Partition)
		count[pair{part, state}]++
		cpus[pair{part, state}] += float64(j.CPUs)
		if state == "pending" {
			pending[pair{part, label(j.StateReason)}]++
		}
		if perUser {
			u, a := pair{label(j.UserName), state}, pair{label(j.Account), state}
			userJobs[u]++
			userCPUs[u] += float64(j.CPUs)
			acctJobs[a]++
			acctCPUs[a] += float64(j.CPUs)
		}
	}
	var out []prometheus.Metric
	for _, x := range []struct {
		d *prometheus.Desc
		m map[pair]float64
	}{{descJobs, count}, {descJobsCPUs, cpus}, {descJobsPending, pending},
		{descUserJobs, userJobs}, {descUserCPUs, userCPUs}, {descAcctJobs, acctJobs}, {descAcctCPUs, acctCPUs}} {
		for k, v := range x.m {
			out = append(out, gauge(x.d, v, cl, k.a, k.b))
		}
	}
	return out
}

func partitionMetrics(cluster string, parts []slurm.Partition) []prometheus.Metric {
	cl := label(cluster)
	var out []prometheus.Metric
	seen := map[string]bool{}
	for _, p := range parts {
		name := label(p.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out,
			gauge(descPartitionInfo, 1, cl, name, label(strings.ToLower(strings.Join(p.State, ",")))),
			gauge(descPartitionTotalCPU, float64(p.TotalCPUs), cl, name))
	}
	return out
}

func diagMetrics(cluster string, d *slurm.Diag) []prometheus.Metric {
	cl := label(cluster)
	out := []prometheus.Metric{
		gauge(descServerThreads, float64(d.ServerThreadCount), cl),
		gauge(descAgentQueue, float64(d.AgentQueueSize), cl),
		gauge(descDBDAgentQueue, float64(d.DBDAgentQueueSize), cl),
		gauge(descSchedJobs, float64(d.JobsSubmitted), cl, "submitted"),
		gauge(descSchedJobs, float64(d.JobsStarted), cl, "started"),
		gauge(descSchedJobs, float64(d.JobsCompleted), cl, "completed"),
		gauge(descSchedJobs, float64(d.JobsCanceled), cl, "canceled"),
		gauge(descSchedJobs, float64(d.JobsFailed), cl, "failed"),
		gauge(descSchedCycleLast, d.ScheduleCycleLast.Seconds(), cl),
		gauge(descSchedCycleMax, d.ScheduleCycleMax.Seconds(), cl),
		gauge(descSchedCycleMean, d.ScheduleCycleMean.Seconds(), cl),
		gauge(descSchedCycles, float64(d.ScheduleCycles), cl),
		gauge(descSchedCyclesPerMin, float64(d.ScheduleCyclesPerMinute), cl),
		gauge(descSchedMeanDepth, float64(d.ScheduleCycleMeanDepth), cl),
		gauge(descSchedQueue, float64(d.ScheduleQueueLength), cl),
		gauge(descBFActive, boolf(d.BackfillActive), cl),
		gauge(descBFCycleLast, d.BackfillCycleLast.Seconds(), cl),
		gauge(descBFCycleMax, d.BackfillCycleMax.Seconds(), cl),
		gauge(descBFCycleMean, d.BackfillCycleMean.Seconds(), cl),
		gauge(descBFCycles, float64(d.BackfillCycles), cl),
		gauge(descBFJobs, float64(d.BackfillJobs), cl),
		gauge(descBFLastJobs, float64(d.BackfillLastJobs), cl),
		gauge(descBFLastDepth, float64(d.BackfillLastDepth), cl),
		gauge(descBFLastDepthTry, float64(d.BackfillLastDepthTry), cl),
		gauge(descBFDepthMean, float64(d.BackfillDepthMean), cl),
		gauge(descBFQueue, float64(d.BackfillQueueLength), cl),
	}
	if !d.ResetTime.IsZero() {
		out = append(out, gauge(descDiagReset, unix(d.ResetTime), cl))
	}
	if !d.BackfillLastCycle.IsZero() {
		out = append(out, gauge(descBFLastCycle, unix(d.BackfillLastCycle), cl))
	}
	return out
}
