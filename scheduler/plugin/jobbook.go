// The job book: the Slurm jobs of sunk's pods, indexed by pod, from the job informer.

package plugin

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

func (p *Plugin) index(j *slurm.Job, present bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.submitted, j.ID)
	for _, u := range p.placeholderPods(j) {
		uid := types.UID(u)
		if present {
			if isLive(j) {
				p.lastJob[uid] = j.ID
			}
			if p.byUID[uid] == nil {
				p.byUID[uid] = map[uint32]bool{}
			}
			p.byUID[uid][j.ID] = true
		} else if m := p.byUID[uid]; m != nil {
			delete(m, j.ID)
			if len(m) == 0 {
				delete(p.byUID, uid)
			}
		}
	}
}

// jobOf is the job of a pod: a live one if there is one, else the newest that ended.
func (p *Plugin) jobOf(uid types.UID) (*slurm.Job, bool) {
	p.mu.Lock()
	ids := make([]uint32, 0, len(p.byUID[uid]))
	for id := range p.byUID[uid] {
		ids = append(ids, id)
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

func isRunning(j *slurm.Job) bool {
	return j.BaseState() == "RUNNING" && !j.HasState("CONFIGURING") && j.Nodes != ""
}

// topology is where compute pods run: Slurm node name ↔ Kubernetes node name.
type topology struct {
	hostOf map[string]string   // Slurm node → Kubernetes node
	onNode map[string][]string // Kubernetes node → Slurm nodes
}

func (p *Plugin) topology() (*topology, error) {
	var pods []*v1.Pod
	var err error
	if p.args.Namespace != "" {
		pods, err = p.pods.Pods(p.args.Namespace).List(p.computes)
	} else {
		pods, err = p.pods.List(p.computes)
	}
	if err != nil {
		return nil, err
	}
	t := &topology{hostOf: map[string]string{}, onNode: map[string][]string{}}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			continue
		}
		name := pod.Labels[wellknown.LabelSlurmNode]
		if name == "" {
			name = pod.Name
		}
		t.hostOf[name] = pod.Spec.NodeName
		t.onNode[pod.Spec.NodeName] = append(t.onNode[pod.Spec.NodeName], name)
	}
	return t, nil
}
