// The job book: the Slurm jobs of sunk's pods, indexed by pod, from the job informer.

package plugin

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/slurm"
)

func (p *Plugin) index(j *slurm.Job, present bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.submitted, j.ID)
	if !present {
		delete(p.gangs, j.ID)
		delete(p.immediate, j.ID)
	}
	for _, key := range p.placeholderKeys(j) {
		if present {
			if isLive(j) {
				p.lastJob[key] = j.ID
			}
			if p.byKey[key] == nil {
				p.byKey[key] = map[uint32]bool{}
			}
			p.byKey[key][j.ID] = true
		} else if m := p.byKey[key]; m != nil {
			delete(m, j.ID)
			if len(m) == 0 {
				delete(p.byKey, key)
			}
		}
	}
}

// keysOf are the job-book keys a pod's job may be filed under: the pod's own and, for a gang
// member, its gang's (from the members the pod cache holds now). A PodGroup's pod beyond those
// its job is for has no part in that job.
func (p *Plugin) keysOf(pod *v1.Pod) []string {
	keys := []string{podJobKey(pod.UID)}
	if g, from, _ := p.gangOf(pod); g.Name != "" {
		members := p.gangMembers(pod, g, from)
		if from != gangFromPodGroup || hasPod(members, pod) {
			keys = append(keys, gangJobKey(pod.Namespace, g.Name, members))
		}
	}
	return keys
}

// currentJob is the job a pod has to go by: as jobOf, but a job that ended without ever being
// given nodes counts as none (refused by slurmctld, which keeps a FAILED record of some
// refusals, such as an immediate allocation it could not start; or cancelled while it pended),
// so the pod asks again.
func (p *Plugin) currentJob(pod *v1.Pod) (*slurm.Job, bool) {
	j, ok := p.jobOf(pod)
	if ok && neverRan(j) {
		return nil, false
	}
	return j, ok
}

// jobOf is the job of a pod: a live one if there is one, else the newest that ended.
func (p *Plugin) jobOf(pod *v1.Pod) (*slurm.Job, bool) { return p.jobFor(p.keysOf(pod)...) }

// jobFor is the job filed under any of keys: a live one if there is one, else the newest that
// ended.
func (p *Plugin) jobFor(keys ...string) (*slurm.Job, bool) {
	var ids []uint32
	p.mu.Lock()
	for _, key := range keys {
		for id := range p.byKey[key] {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	var best *slurm.Job
	for _, id := range ids {
		j, ok := p.job(id)
		if !ok {
			continue
		}
		if best == nil || (isLive(j) && !isLive(best)) || (isLive(j) == isLive(best) && j.ID > best.ID) {
			best = j
		}
	}
	return best, best != nil
}

// membersOf are the pods of a placeholder job (keys from placeholderKeys), in the order of its
// nodes; nil entries for pods that are gone. A gang job's members are those it was submitted for
// (remembered) or, after a restart, the gang in the pod cache whose key is the job's; a gang
// job none matches gets one nil member: its pods are gone, or not all of them.
func (p *Plugin) membersOf(j *slurm.Job, keys []string, byUID map[types.UID]*v1.Pod, groups func() map[string][]*v1.Pod) []*v1.Pod {
	if !strings.HasPrefix(keys[0], gangKey) {
		members := make([]*v1.Pod, len(keys))
		for i, key := range keys {
			members[i] = byUID[types.UID(strings.TrimPrefix(key, podKey))]
		}
		return members
	}
	p.mu.Lock()
	uids, ok := p.gangs[j.ID]
	p.mu.Unlock()
	if !ok {
		g, found := groups()[keys[0]]
		if !found {
			return []*v1.Pod{nil}
		}
		uids = uidsOf(g)
		p.mu.Lock()
		p.gangs[j.ID] = uids
		p.mu.Unlock()
	}
	members := make([]*v1.Pod, len(uids))
	for i, uid := range uids {
		members[i] = byUID[uid]
	}
	return members
}

func uidsOf(pods []*v1.Pod) []types.UID {
	uids := make([]types.UID, len(pods))
	for i, pod := range pods {
		uids[i] = pod.UID
	}
	return uids
}

// memberIndex is the pod's place among its running job's members: the job's i-th node is the
// i-th member's (gang members in name order; a single pod is the first). -1: not a member.
func (p *Plugin) memberIndex(pod *v1.Pod, j *slurm.Job) int {
	keys := p.placeholderKeys(j)
	if len(keys) == 0 {
		return -1
	}
	if !strings.HasPrefix(keys[0], gangKey) {
		return slices.Index(keys, podJobKey(pod.UID))
	}
	p.mu.Lock()
	uids, ok := p.gangs[j.ID]
	p.mu.Unlock()
	if !ok {
		g, from, _ := p.gangOf(pod)
		members := p.gangMembers(pod, g, from)
		if g.Name == "" || gangJobKey(pod.Namespace, g.Name, members) != keys[0] {
			return -1
		}
		uids = uidsOf(members)
		p.mu.Lock()
		p.gangs[j.ID] = uids
		p.mu.Unlock()
	}
	return slices.Index(uids, pod.UID)
}

// job is a job from the list, or one this process submitted that the list does not show yet.
func (p *Plugin) job(id uint32) (*slurm.Job, bool) {
	if j, ok := p.jobs.Get(id); ok {
		return &j, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.submitted[id]; ok {
		j := s.job
		return &j, true
	}
	return nil, false
}

// isLive: the job holds or waits for an allocation.
func isLive(j *slurm.Job) bool {
	switch j.BaseState() {
	case "PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return !j.HasState("COMPLETING") || j.BaseState() == "RUNNING"
	}
	return false
}

// neverRan: the job ended without ever being given nodes.
func neverRan(j *slurm.Job) bool { return !isLive(j) && j.Nodes == "" }

func isRunning(j *slurm.Job) bool {
	return j.BaseState() == "RUNNING" && !j.HasState("CONFIGURING") && j.Nodes != ""
}
