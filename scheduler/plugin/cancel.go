// Cancelling Slurm jobs: off the lifecycle loop, and once per cancelRetry per job.

package plugin

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// cancelRetry is how long a cancellation this process sent stands: the job is not cancelled
// again, nor bound to, until then; a cancellation that failed is forgotten at once (cancel).
const cancelRetry = time.Minute

// cancelling reports whether this process sent a cancellation of job id within cancelRetry.
// l.mu is held.
func (l *lifecycle) cancelling(id uint32) bool {
	at, ok := l.cancelled[id]
	return ok && time.Since(at) < cancelRetry
}

// markCancelling records a cancellation of job id about to be sent, unless one was sent within
// cancelRetry: then it returns false and nothing is to be sent. l.mu is held.
func (l *lifecycle) markCancelling(id uint32) bool {
	if l.cancelling(id) {
		return false
	}
	l.cancelled[id] = time.Now()
	return true
}

// cancel cancels a job off the loop (a Slurm round trip per job must not delay the others); a
// failure is retried by a later pass.
func (p *Plugin) cancel(logger klog.Logger, id uint32, reason string, members []*v1.Pod) {
	p.cancelSlots <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := p.slurm.CancelJob(ctx, id)
	cancel()
	<-p.cancelSlots
	if err != nil && !slurmGone(err) {
		logger.Error(err, "cancelling Slurm job", "job", id)
		p.lc.mu.Lock()
		delete(p.lc.cancelled, id)
		p.lc.mu.Unlock()
		return
	}
	jobsCancelled.WithLabelValues(reason).Inc()
	logger.Info("cancelled Slurm job", "job", id, "reason", reason)
	var waiting []*v1.Pod
	for _, o := range members {
		if o != nil && alive(o) {
			p.lc.event(p, o, v1.EventTypeNormal, "SlurmJobCancelled", "cancelled Slurm job %d: a pod of it was %s", id, strings.TrimPrefix(reason, "pod-"))
			if o.Spec.NodeName == "" {
				waiting = append(waiting, o)
			}
		}
	}
	// The gang's members that waited for the job wait out of the queue: let them in once, so
	// that their condition says what they wait for now (a complete gang), not the cancelled job.
	p.activate(logger, waiting)
}
