// Releasing a job's resources once its pods are gone: noticing the deletion at once, and
// timing each step until Slurm can place another job there.

package plugin

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"sunk.dev/sunk/pkg/slurm"
)

// releaseClock times the release of a placeholder job's resources, by phase of
// sunk_scheduler_release_seconds: notice (its pod seen gone until the lifecycle loop decides to
// cancel the job), cancel (until Slurm answers the cancellation) and complete (until the job
// list shows the job ended and no longer COMPLETING: slurmctld places no job on a node while a
// job there completes, so this is when the resources are free for the next pod).
type releaseClock struct {
	mu       sync.Mutex
	gone     map[uint32]time.Time // job → when a pod of it was first seen gone
	answered map[uint32]time.Time // job → when Slurm answered its cancellation
}

func newReleaseClock() *releaseClock {
	return &releaseClock{gone: map[uint32]time.Time{}, answered: map[uint32]time.Time{}}
}

// podGone records that a pod of job id was seen deleted or finished.
func (r *releaseClock) podGone(id uint32, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.gone[id]; !ok {
		r.gone[id] = at
	}
}

// cancelled records Slurm's answer to the cancellation of job id, decided at decided.
func (r *releaseClock) cancelled(id uint32, decided, answered time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gone, ok := r.gone[id]; ok {
		releaseSeconds.WithLabelValues("notice").Observe(max(decided.Sub(gone).Seconds(), 0))
		delete(r.gone, id)
	}
	releaseSeconds.WithLabelValues("cancel").Observe(answered.Sub(decided).Seconds())
	r.answered[id] = answered
}

// completed records that job id was seen done completing.
func (r *releaseClock) completed(id uint32, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if answered, ok := r.answered[id]; ok {
		releaseSeconds.WithLabelValues("complete").Observe(max(at.Sub(answered).Seconds(), 0))
	}
	delete(r.answered, id)
	delete(r.gone, id)
}

// forget drops job id (it left the job list).
func (r *releaseClock) forget(id uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.answered, id)
	delete(r.gone, id)
}

// freedResources reports whether a job update is the moment the job's resources became free
// for another job: it had nodes, and now it has ended and no longer completes. old is nil for a
// job first seen (one that lived less than a poll: allocated, bound, deleted and cancelled).
func freedResources(old, cur *slurm.Job) bool {
	done := func(j *slurm.Job) bool { return !isLive(j) && !j.HasState("COMPLETING") }
	return cur.Nodes != "" && done(cur) && (old == nil || !done(old))
}

// sawFreed lets a waiting allocation ask again when a job's resources became free (old is nil
// for a job first seen).
func (p *Plugin) sawFreed(old, cur *slurm.Job) {
	if freedResources(old, cur) {
		p.releases.completed(cur.ID, time.Now())
		p.allocationQueue.freed(1)
	}
}

// podGoneHandler wakes the lifecycle loop as soon as one of this scheduler's pods with a live
// job is deleted or finishes, instead of at its next tick: until the job is cancelled, its
// resources are lost to the pods waiting for them.
func (p *Plugin) podGoneHandler() cache.ResourceEventHandler {
	gone := func(pod *v1.Pod) {
		if pod.Spec.SchedulerName != p.scheduler {
			return
		}
		if j, ok := p.jobOf(pod); ok && isLive(j) {
			p.releases.podGone(j.ID, time.Now())
			p.wakeLifecycle()
		}
	}
	return onPodGone(gone)
}

// onPodGone calls gone once for a pod that stops being alive: when an update ends it
// (alive), or when it is deleted, even unseen (a tombstone).
func onPodGone(gone func(*v1.Pod)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			cur, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && alive(old) && !alive(cur) {
				gone(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				gone(pod)
			}
		},
	}
}
