// Duplicate jobs: one pod or gang, two live Slurm jobs.

package plugin

import (
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/wellknown"
)

// bindingHold is how long a scheduling cycle's choice of a job protects it from being cancelled
// as a duplicate: longer than a cycle and its binding take, after which the pod's job
// annotation says which job it is bound to.
const bindingHold = time.Minute

// claimForBinding records that a scheduling cycle binds a pod to the running job id, unless this
// process is cancelling that job (as a duplicate, or for a pod that is gone): then the cycle
// must not bind to it, and false is returned. It shares lc.mu with cancelDuplicates, so that a
// job is either claimed or being cancelled, never both: otherwise a cycle could bind a pod to
// the job a duplicate pass was cancelling while the next pass, seeing the binding, cancelled
// the other one, leaving the pod no job at all.
func (p *Plugin) claimForBinding(id uint32) bool {
	p.lc.mu.Lock()
	defer p.lc.mu.Unlock()
	if p.lc.cancelling(id) {
		return false
	}
	p.lc.binding[id] = time.Now()
	return true
}

// cancelDuplicates keeps one live job per pod or gang and cancels the others. A submission that
// slurmrestd carried out but whose answer was lost (a timeout, a proxy's 502) leaves the plugin
// without the job id, so the pod is submitted again, and both jobs would hold resources for one
// pod. The job kept is the one a pod is bound to (its job annotation), else the one a
// scheduling cycle is binding a pod to (claimForBinding), else the newest: the one the next
// scheduling cycle uses (jobFor).
func (p *Plugin) cancelDuplicates(logger klog.Logger, byUID map[types.UID]*v1.Pod) {
	var bound map[uint32]bool // the jobs pods are bound to: read only when a key has two live jobs
	boundJobs := func() map[uint32]bool {
		if bound == nil {
			bound = map[uint32]bool{}
			for _, pod := range byUID {
				if id, err := strconv.ParseUint(pod.Annotations[wellknown.AnnotationJob], 10, 32); err == nil {
					bound[uint32(id)] = true
				}
			}
		}
		return bound
	}
	p.mu.Lock()
	var groups [][]uint32
	for _, ids := range p.byKey {
		if len(ids) > 1 {
			group := make([]uint32, 0, len(ids))
			for id := range ids {
				group = append(group, id)
			}
			groups = append(groups, group)
		}
	}
	p.mu.Unlock()
	for _, group := range groups {
		var live []uint32
		for _, id := range group {
			if j, ok := p.job(id); ok && isLive(j) {
				live = append(live, id)
			}
		}
		if len(live) < 2 {
			continue
		}
		slices.Sort(live)
		keep, cancel := p.markDuplicates(live, boundJobs())
		for _, id := range cancel {
			logger.Info("cancelling a second live Slurm job of one pod or gang", "job", id, "kept", keep)
			go p.cancel(logger, id, "duplicate", nil)
		}
	}
}

// markDuplicates chooses the job to keep of live (sorted) and marks the others cancelled,
// returning those not already cancelled within the last minute.
func (p *Plugin) markDuplicates(live []uint32, bound map[uint32]bool) (keep uint32, cancel []uint32) {
	p.lc.mu.Lock()
	defer p.lc.mu.Unlock()
	keep = live[len(live)-1]
	for _, id := range live {
		if at, ok := p.lc.binding[id]; ok && time.Since(at) < bindingHold {
			keep = id
		}
	}
	for _, id := range live {
		if bound[id] {
			keep = id
		}
	}
	for _, id := range live {
		if id == keep {
			continue
		}
		if p.lc.markCancelling(id) {
			cancel = append(cancel, id)
		}
	}
	return keep, cancel
}
