package slurmcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/event"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
)

// TestNodeSetGPUChangesWakeTheCluster: the cluster's configuration renders whether a NodeSet
// has GPUs (gres.conf's Include) and the type it names (accounting TRES); other changes of a
// NodeSet do not wake its cluster.
func TestNodeSetGPUChangesWakeTheCluster(t *testing.T) {
	set := func(gpus, typ string, replicas int32) *sunkv1.NodeSet {
		ns := &sunkv1.NodeSet{Spec: sunkv1.NodeSetSpec{GPUType: typ, Replicas: &replicas}}
		if gpus != "" {
			ns.Spec.Resources.Limits = corev1.ResourceList{render.ResourceGPU: resource.MustParse(gpus)}
		}
		return ns
	}
	for _, c := range []struct {
		name     string
		old, new *sunkv1.NodeSet
		want     bool
	}{
		{"gains GPUs", set("", "", 1), set("8", "", 1), true},
		{"loses GPUs", set("8", "h100", 1), set("", "h100", 1), true},
		{"names a type", set("8", "", 1), set("8", "h100", 1), true},
		{"another type", set("8", "h100", 1), set("8", "a100", 1), true},
		{"more GPUs of the same type", set("4", "h100", 1), set("8", "h100", 1), false},
		{"scaled", set("8", "h100", 1), set("8", "h100", 3), false},
		{"a type without GPUs", set("", "", 1), set("", "h100", 1), false},
	} {
		if got := nodeSetGoneOrConfigChanged.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: wakes the cluster %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNodeSetContainersWakeTheCluster: plugstack.conf renders whether a NodeSet enables
// containers; their settings are the pods' (the NodeSet's template), not the cluster's.
func TestNodeSetContainersWakeTheCluster(t *testing.T) {
	set := func(c *sunkv1.NodeSetContainers) *sunkv1.NodeSet {
		return &sunkv1.NodeSet{Spec: sunkv1.NodeSetSpec{Containers: c}}
	}
	on := &sunkv1.NodeSetContainers{Enabled: true}
	for _, c := range []struct {
		name     string
		old, new *sunkv1.NodeSet
		want     bool
	}{
		{"enables containers", set(nil), set(on), true},
		{"disables them", set(on), set(&sunkv1.NodeSetContainers{}), true},
		{"another registry", set(on), set(&sunkv1.NodeSetContainers{Enabled: true, InsecureRegistries: []string{"r:5000"}}), false},
		{"settings while disabled", set(nil), set(&sunkv1.NodeSetContainers{InsecureRegistries: []string{"r"}}), false},
	} {
		if got := nodeSetGoneOrConfigChanged.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: wakes the cluster %v, want %v", c.name, got, c.want)
		}
	}
	if !nodeSetGoneOrConfigChanged.Create(event.CreateEvent{Object: set(on)}) || nodeSetGoneOrConfigChanged.Create(event.CreateEvent{Object: set(nil)}) {
		t.Error("a new NodeSet wakes its cluster exactly when it has GPUs or containers")
	}
}
