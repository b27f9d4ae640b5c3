package plugin

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"sunk.dev/sunk/pkg/wellknown"
)

// The topology is built once and kept until a compute pod's placement changes, as the pod
// informer's events report it; other pods and other changes leave it be.
func TestTopologyCacheFollowsComputePods(t *testing.T) {
	b := newTestBed(t, 2, nil, nil)
	p := b.p
	h := p.topologyHandler()
	p.topo.watch()
	indexer := b.h.inf.Core().V1().Pods().Informer().GetIndexer()
	get := func() *topology {
		t.Helper()
		topo, err := p.topology()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	update := func(old *v1.Pod, change func(*v1.Pod)) *v1.Pod {
		t.Helper()
		pod := old.DeepCopy()
		change(pod)
		if err := indexer.Update(pod); err != nil {
			t.Fatal(err)
		}
		h.OnUpdate(old, pod)
		return pod
	}
	n1, _, _ := indexer.GetByKey("slurm/n1")
	pod := n1.(*v1.Pod)

	first := get()
	if first.hostOf["n1"] != "k1" || first.hostOf["n2"] != "k2" || len(first.onNode) != 2 {
		t.Fatalf("topology %+v", first)
	}
	if get() != first {
		t.Error("built again with no change")
	}

	pod = update(pod, func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Annotations = map[string]string{"sunk.dev/any": "x"}
	})
	if get() != first {
		t.Error("a status and annotation update rebuilt the topology")
	}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n9", Namespace: "elsewhere",
		Labels: map[string]string{wellknown.LabelCluster: "c1", wellknown.LabelComponent: wellknown.ComponentCompute}},
		Spec: v1.PodSpec{NodeName: "k9"}}
	h.OnAdd(other, false)
	h.OnAdd(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "slurm"}, Spec: v1.PodSpec{NodeName: "k1"}}, false)
	if get() != first {
		t.Error("a pod outside the cluster's compute pods rebuilt the topology")
	}

	pod = update(pod, func(p *v1.Pod) { p.Labels[wellknown.LabelSlurmNode] = "gpu-1" })
	if topo := get(); topo == first || topo.hostOf["gpu-1"] != "k1" || topo.hostOf["n1"] != "" {
		t.Errorf("after the Slurm node label changed: %+v", topo)
	}
	moved := get()
	now := metav1.Now()
	pod = update(pod, func(p *v1.Pod) { p.DeletionTimestamp = &now })
	if topo := get(); topo == moved || topo.hostOf["gpu-1"] != "" || len(topo.onNode["k1"]) != 0 {
		t.Errorf("after the pod began to be deleted: %+v", topo)
	}

	n3 := b.addPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n3", Namespace: "slurm",
		Labels: map[string]string{wellknown.LabelCluster: "c1", wellknown.LabelComponent: wellknown.ComponentCompute}},
		Spec: v1.PodSpec{NodeName: "k2"}})
	h.OnAdd(n3, false)
	if topo := get(); topo.hostOf["n3"] != "k2" || len(topo.onNode["k2"]) != 2 {
		t.Errorf("after n3 was added: %+v", topo)
	}

	b.deletePod(n3)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "slurm/n3", Obj: n3})
	if topo := get(); topo.hostOf["n3"] != "" {
		t.Errorf("after n3 went (a missed deletion): %+v", topo)
	}
}
