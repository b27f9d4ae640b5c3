package nodeset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

func TestGPUConfigWait(t *testing.T) {
	withGPUs := func(n string) *sunkv1.NodeSet {
		ns := &sunkv1.NodeSet{}
		ns.Spec.Resources.Limits = corev1.ResourceList{wellknown.ResourceGPU: resource.MustParse(n)}
		return ns
	}
	cluster := func(included bool) *sunkv1.SlurmCluster {
		sc := &sunkv1.SlurmCluster{}
		sc.Name = "c"
		sc.Status.GPUDevicesIncluded = included
		return sc
	}
	for _, c := range []struct {
		name     string
		ns       *sunkv1.NodeSet
		included bool
		wait     bool
	}{
		{"no GPUs, no Include", &sunkv1.NodeSet{}, false, false},
		{"no GPUs, Include", &sunkv1.NodeSet{}, true, false},
		{"GPUs, no Include yet", withGPUs("8"), false, true},
		{"GPUs, Include running", withGPUs("8"), true, false},
		{"a zero GPU limit is no GPUs", withGPUs("0"), false, false},
	} {
		got := gpuConfigWait(c.ns, cluster(c.included))
		if (got != "") != c.wait {
			t.Errorf("%s: gpuConfigWait = %q, want waiting %v", c.name, got, c.wait)
		}
	}
}
