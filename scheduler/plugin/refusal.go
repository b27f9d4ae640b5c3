// Slurm's refusals of a pod's job, kept while Slurm would give the same answer again.

package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"sunk.dev/sunk/pkg/wellknown"
)

// refusalRetry is how long a refusal stands when nothing it depends on changed: Slurm may
// refuse for reasons the plugin cannot see change (an account or QOS made in the accounting
// database), so a refused pod asks once more after this long, and no more often.
const refusalRetry = 30 * time.Minute

// refusal is Slurm's answer to a pod's job, with what it was the answer to. Before, a refusal
// was shown once and the pod's next attempt (the queue's five-minute flush, or any compute pod
// event) submitted the same job again: a pod asking for 9 GPUs where nodes have 8 made a
// failed Slurm job every few minutes for as long as it existed.
type refusal struct {
	msg string
	ask string // refusalAsk when Slurm refused
	at  time.Time
}

// standing reports whether the refusal is still Slurm's answer to the pod asking ask now.
func (r refusal) standing(ask string, now time.Time) bool {
	return r.ask == ask && now.Sub(r.at) < refusalRetry
}

// refusalAsk sums up what decides Slurm's answer to a pod's job: the job the pod asks for (its
// resources and annotations, not the comment), the Slurm nodes on the Kubernetes nodes the pod
// may use (by its node affinity and tolerations: the rest are excluded), and the shape of every
// Slurm node (CPUs, memory, GRES, partitions, features; not their state, which changes with
// every job and does not make an impossible request possible). A node that registers, leaves
// or changes its GRES, a taint lifted, a changed annotation: any of these gives the pod
// another try. The nodes' shapes are one digest, kept until a shape changes (nodeShapes).
func (p *Plugin) refusalAsk(pod *v1.Pod, spec *podSpec, topo *topology) string {
	job := spec.Job
	job.Comment, job.ExcludedNodes = "", nil
	b, err := json.Marshal(job)
	if err != nil {
		return "" // never equal to a recorded ask of a marshalled job: the pod tries again
	}
	h := sha256.New()
	h.Write(b)
	allowed := sets.List(p.allowedSlurmNodes(pod, topo))
	fmt.Fprintf(h, "\nallowed=%s\n", strings.Join(allowed, ","))
	shapes := p.shapes.digest(p.nodes.All())
	h.Write(shapes[:])
	return hex.EncodeToString(h.Sum(nil))
}

// allowedSlurmNodes are the Slurm nodes hosted on Kubernetes nodes that the pod's required node
// affinity (node selector included) and tolerations allow.
func (p *Plugin) allowedSlurmNodes(pod *v1.Pod, topo *topology) sets.Set[string] {
	allowed := sets.New[string]()
	nodes := p.h.SharedInformerFactory().Core().V1().Nodes().Lister()
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	for name, slurmNodes := range topo.onNode {
		node, err := nodes.Get(name)
		if err != nil {
			continue
		}
		if ok, err := affinity.Match(node); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, notNodeLock); untolerated {
			continue
		}
		allowed.Insert(slurmNodes...)
	}
	return allowed
}

// notNodeLock selects the taints that rule a node out of a pod's Slurm job: those the binding
// cycle filters on, except another job's node lock. That lock keeps off pods Slurm did not place;
// the node's Slurm resources are Slurm's to hand out once the locking job ends, and a node
// excluded from a pending job stays excluded however soon the lock lifts.
func notNodeLock(t *v1.Taint) bool {
	return scheduleTaints(t) && t.Key != wellknown.TaintJob
}

// standingRefusal is the refusal of the pod's job that still stands, "" if none. A refusal
// that no longer stands is forgotten: the pod asks again.
func (p *Plugin) standingRefusal(pod *v1.Pod, spec *podSpec, topo *topology) string {
	p.mu.Lock()
	r, ok := p.refused[pod.UID]
	p.mu.Unlock()
	if !ok {
		return ""
	}
	if r.standing(p.refusalAsk(pod, spec, topo), time.Now()) {
		return r.msg
	}
	p.mu.Lock()
	if cur, ok := p.refused[pod.UID]; ok && cur.at.Equal(r.at) {
		delete(p.refused, pod.UID)
	}
	p.mu.Unlock()
	return ""
}

// forgetRefusals drops the refusals of pods that are gone.
func (p *Plugin) forgetRefusals(exists func(types.UID) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	maps.DeleteFunc(p.refused, func(uid types.UID, _ refusal) bool { return !exists(uid) })
}
