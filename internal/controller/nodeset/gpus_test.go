package nodeset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		if included {
			sc.Status.Conditions = []metav1.Condition{{Type: sunkv1.ConditionGPUDevicesIncluded, Status: metav1.ConditionTrue}}
		} else {
			sc.Status.Conditions = []metav1.Condition{{Type: sunkv1.ConditionGPUDevicesIncluded, Status: metav1.ConditionFalse}}
		}
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
	// No condition at all (a new cluster, or one an older operator reconciles) waits too.
	if gpuConfigWait(withGPUs("8"), &sunkv1.SlurmCluster{}) == "" {
		t.Error("GPUs and a cluster without the condition: not waiting")
	}
}
