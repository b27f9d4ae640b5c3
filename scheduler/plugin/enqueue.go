// PreEnqueue: pods wait outside the scheduling queue while Slurm decides, and a single pod's
// job is submitted from here, so that it costs one scheduling cycle instead of two.

package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PreEnqueue keeps a pod out of the scheduling queue while Slurm decides: its job is being
// submitted, or waits to start. Such a pod would only fail its cycle (a status write, the
// PostFilter plugins run); it is let in when the lifecycle loop activates it on its job's start
// (or end, or refusal). Before the first Slurm lists, every pod waits: the loop activates them
// all after. It reads only this process's maps and the pod cache.
func (p *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *framework.Status {
	if !p.jobs.HasSynced() || !p.nodes.HasSynced() || !p.policy.hasSynced() {
		return unresolvable("waiting for the first list of Slurm jobs and nodes, and for the SlurmCluster")
	}
	p.mu.Lock()
	inflight := p.inflight[pod.UID]
	p.mu.Unlock()
	if inflight {
		return unresolvable("submitting the Slurm job")
	}
	job, ok := p.currentJob(pod)
	if !ok || !isLive(job) {
		// A pod about to ask for a job: its namespace's policy must allow it. Refused here,
		// it costs no cycle and preempts nothing; a policy change activates it again.
		if msg := p.refusal(pod); msg != "" {
			go p.showRefusal(context.Background(), pod, msg)
			return unresolvable("%s", msg)
		}
		p.forgetRefusal(pod.UID)
	}
	if !ok && p.submitFromQueue(pod) {
		return unresolvable("submitting the Slurm job")
	}
	if ok && isLive(job) && !isRunning(job) {
		return unresolvable("%s", pendingMessage(job))
	}
	return nil
}

// submitFromQueue submits the job of a single pod that has none, before any scheduling cycle:
// a cycle that only submits ends in a scheduling failure, which kube-scheduler answers with an
// error log, an event and a synchronous status write (about 20 ms of the one scheduling
// goroutine per pod; BenchmarkThousandPods ran at 45 cycles/s). The nodes Slurm may use are
// those hosting a compute pod whose node the pod's required node affinity and tolerations
// allow; the binding cycle, once the job runs, checks the rest (resources, ports, volumes) as
// for any pod. It reports false when the pod takes the cycle path instead: gangs (Permit binds
// them together), a pod with a Slurm refusal to report, an annotation error to report, or no
// allowed node (the cycle's filters say why).
func (p *Plugin) submitFromQueue(pod *v1.Pod) bool {
	spec, err := p.specOf(pod)
	if err != nil || spec.Gang.Size > 0 {
		return false
	}
	topo, err := p.topology()
	if err != nil {
		return false
	}
	allowed := p.allowedSlurmNodes(pod, topo)
	if allowed.Len() == 0 {
		return false
	}
	if p.standingRefusal(pod, spec, topo) != "" {
		return false
	}
	key := podJobKey(pod.UID)
	js := spec.Job
	p.chargeTo(pod.Namespace, &js)
	js.Comment = p.mark.comment(key)
	js.ExcludedNodes = p.excludedNodes(allowed)
	asks := map[types.UID]string{pod.UID: p.refusalAsk(pod, spec, topo)}
	p.mu.Lock()
	_, refused := p.refused[pod.UID]
	busy := p.inflight[pod.UID]
	if !refused && !busy {
		p.inflight[pod.UID] = true
	}
	p.mu.Unlock()
	if refused {
		return false
	}
	if !busy {
		go p.submit(js, key, []*v1.Pod{pod}, asks)
	}
	return true
}

// scheduleTaints are the taints TaintToleration filters on.
func scheduleTaints(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}
