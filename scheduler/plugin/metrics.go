package plugin

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"

	"sunk.dev/sunk/pkg/slurm"
)

// The scheduler's own metrics, served with kube-scheduler's on its /metrics endpoint.
var (
	pendingPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sunk_scheduler_pending_pods",
		Help: "Pods of sunk-scheduler that are not bound yet (waiting for their Slurm job or for Kubernetes).",
	})
	bindLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sunk_scheduler_bind_latency_seconds",
		Help:    "Time from a pod's creation to its binding by sunk-scheduler.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
	})
	phaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sunk_scheduler_phase_seconds",
		Help: "Where a pod's time to bind goes, by phase (the creation and Slurm times have a one-second resolution): " +
			"queue (the pod's creation until its job is submitted), submit (asking Slurm for the job, until its answer), " +
			"pending (the job's submission until its start, in Slurm's times), " +
			"detect (the job's start in Slurm until its job list shows it), " +
			"activate (listed running until the lifecycle loop activates its pods), bind (activated until bound).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"phase"})
	releaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sunk_scheduler_release_seconds",
		Help: "Where the time goes from a pod's deletion (or end) until its Slurm job's resources are free for another, by phase: " +
			"notice (the pod seen gone until the job's cancellation is decided), cancel (until Slurm answers it, including the wait for a request slot), " +
			"complete (until the job list shows the job ended and no longer COMPLETING; slurmctld places no job on a node where a job completes).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"phase"})
	lifecyclePassSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sunk_scheduler_lifecycle_pass_seconds",
		Help: "How long each pass of the lifecycle loop took (pods and jobs matched, cancellations and evictions decided); " +
			"the count is the number of passes: one per job list change or pod deletion, at most one at a time.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	jobsSubmitted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sunk_scheduler_jobs_submitted_total",
		Help: "Slurm placeholder jobs submitted.",
	})
	allocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunk_scheduler_allocations_total",
		Help: "Immediate allocations asked of Slurm for placeholder jobs, by result: started (the job runs, no batch job needed), " +
			"refused (Slurm could not start it at once), error (Slurm did not answer; tried again later), held (not sent: the node view showed no room, see viewHasRoom); " +
			"code is Slurm's error number of a refusal " +
			"(2016 resources busy, 2013 a job of higher priority waits, 2014/2015 never satisfiable).",
	}, []string{"result", "code"})
	jobsCancelled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunk_scheduler_jobs_cancelled_total",
		Help: "Slurm placeholder jobs cancelled by sunk-scheduler, by reason (pod-deleted, pod-finished, duplicate: a second live job of one pod or gang).",
	}, []string{"reason"})
	cancelBatchJobs = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sunk_scheduler_cancel_batch_jobs",
		Help:    "Jobs named by each cancellation request (DELETE /jobs) sunk-scheduler sent: a burst of deleted pods is cancelled a batch at a time.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})
	jobsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunk_scheduler_jobs_ended_total",
		Help: "Slurm placeholder jobs that ended under a live pod (the pod is evicted), by Slurm job state; state=\"PREEMPTED\" counts preemptions.",
	}, []string{"state"})
	jobsUntrusted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sunk_scheduler_jobs_untrusted_total",
		Help: "Slurm jobs with a placeholder comment that sunk-scheduler ignores, once per job, by reason: owner (another Slurm user's), mark (its user's, without a valid mark).",
	}, []string{"reason"})

	registerOnce  sync.Once
	slurmMetrics  *slurm.Metrics
	slurmMetricsE error
)

// registerMetrics adds the scheduler's metrics and the Slurm client's to kube-scheduler's
// registry, once per process (a test may start several schedulers).
func registerMetrics() (*slurm.Metrics, error) {
	registerOnce.Do(func() {
		legacyregistry.RawMustRegister(pendingPods, bindLatency, phaseSeconds, releaseSeconds, lifecyclePassSeconds, jobsSubmitted, allocations, jobsCancelled, cancelBatchJobs, jobsEnded, jobsUntrusted)
		slurmMetrics, slurmMetricsE = slurm.NewMetrics(legacyregistry.Registerer())
	})
	return slurmMetrics, slurmMetricsE
}
