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

// cancelDuplicates keeps one live job per pod or gang and cancels the others. A submission that
// slurmrestd carried out but whose answer was lost (a timeout, a proxy's 502) leaves the plugin
// without the job id, so the pod is submitted again, and both jobs would hold resources for one
// pod. The job kept is the one a pod is bound to (its job annotation), else the newest: the one
// the scheduling cycle uses (jobFor).
func (p *Plugin) cancelDuplicates(logger klog.Logger, byUID map[types.UID]*v1.Pod) {
	bound := map[uint32]bool{}
	for _, pod := range byUID {
		if id, err := strconv.ParseUint(pod.Annotations[wellknown.AnnotationJob], 10, 32); err == nil {
			bound[uint32(id)] = true
		}
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
		keep := live[len(live)-1]
		for _, id := range live {
			if bound[id] {
				keep = id
			}
		}
		for _, id := range live {
			if id == keep {
				continue
			}
			p.lc.mu.Lock()
			at, done := p.lc.cancelled[id]
			if !done || time.Since(at) >= time.Minute {
				p.lc.cancelled[id] = time.Now()
			}
			p.lc.mu.Unlock()
			if done && time.Since(at) < time.Minute {
				continue
			}
			logger.Info("cancelling a second live Slurm job of one pod or gang", "job", id, "kept", keep)
			go p.cancel(logger, id, "duplicate", nil)
		}
	}
}
