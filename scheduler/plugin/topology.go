// The compute pods' topology: which Kubernetes node runs which Slurm node, kept from the pod
// informer's events rather than listed at each use.

package plugin

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"sunk.dev/sunk/pkg/wellknown"
)

// topology is where compute pods run: Slurm node name ↔ Kubernetes node name. A topology
// returned by Plugin.topology is shared by every caller until a compute pod changes: read it,
// never write it.
type topology struct {
	hostOf map[string]string   // Slurm node → Kubernetes node
	onNode map[string][]string // Kubernetes node → Slurm nodes
}

// topologyCache holds the last topology built, until a compute pod appears, moves, is being
// deleted or goes. Every scheduling cycle and every queued submission asks for the topology;
// building it lists every compute pod, which at 5,000 of them (BenchmarkSchedulerAtScale) cost
// each pod O(cluster). Compute pods change rarely (they are Slurm's nodes), so reads are O(1)
// and a change costs one rebuild at the next read.
type topologyCache struct {
	mu      sync.Mutex
	watched bool      // the pod informer's events reach invalidate; otherwise build each time
	cur     *topology // nil: build at the next read
}

// get returns the cached topology, or builds one and keeps it while watched.
func (c *topologyCache) get(build func() (*topology, error)) (*topology, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return c.cur, nil
	}
	t, err := build()
	if err != nil || !c.watched {
		return t, err
	}
	c.cur = t
	return t, nil
}

// watch starts keeping topologies: from now on every compute pod change reaches invalidate.
func (c *topologyCache) watch() {
	c.mu.Lock()
	c.watched = true
	c.mu.Unlock()
}

func (c *topologyCache) invalidate() {
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
}

// placement is what a compute pod contributes to the topology; ok is false for a pod that
// contributes nothing (not scheduled, or being deleted).
func placement(pod *v1.Pod) (slurmNode, host string, ok bool) {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return "", "", false
	}
	return wellknown.SlurmNodeOf(pod.Labels, pod.Name), pod.Spec.NodeName, true
}

// topologyHandler invalidates the cache when a compute pod's placement changes. Status and
// annotation updates, which the syncer writes often, leave it be.
func (p *Plugin) topologyHandler() cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			pod, ok := obj.(*v1.Pod)
			return ok && p.isComputePod(pod)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { p.topo.invalidate() },
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := oldObj.(*v1.Pod)
				n, _ := newObj.(*v1.Pod)
				if o == nil || n == nil {
					p.topo.invalidate()
					return
				}
				on, oh, ook := placement(o)
				nn, nh, nok := placement(n)
				if on != nn || oh != nh || ook != nok {
					p.topo.invalidate()
				}
			},
			DeleteFunc: func(any) { p.topo.invalidate() },
		},
	}
}

// isComputePod: a compute pod of the plugin's cluster (in its namespace, when it has one).
func (p *Plugin) isComputePod(pod *v1.Pod) bool {
	return (p.args.Namespace == "" || pod.Namespace == p.args.Namespace) && p.computes.Matches(labels.Set(pod.Labels))
}

// topology is where the cluster's compute pods run now.
func (p *Plugin) topology() (*topology, error) {
	return p.topo.get(p.buildTopology)
}

func (p *Plugin) buildTopology() (*topology, error) {
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
		name, host, ok := placement(pod)
		if !ok {
			continue
		}
		t.hostOf[name] = host
		t.onNode[host] = append(t.onNode[host], name)
	}
	return t, nil
}
