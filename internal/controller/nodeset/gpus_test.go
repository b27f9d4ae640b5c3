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

// TestCreateWaitForContainers: a NodeSet with containers creates pods only once slurmctld runs
// the plugstack.conf with the plugin (ContainersEnabled); GPUs are waited for first.
func TestCreateWaitForContainers(t *testing.T) {
	cluster := func(containers, gpus bool) *sunkv1.SlurmCluster {
		sc := &sunkv1.SlurmCluster{}
		sc.Name = "c"
		st := func(b bool) metav1.ConditionStatus {
			if b {
				return metav1.ConditionTrue
			}
			return metav1.ConditionFalse
		}
		sc.Status.Conditions = []metav1.Condition{{Type: sunkv1.ConditionContainersEnabled, Status: st(containers)},
			{Type: sunkv1.ConditionGPUDevicesIncluded, Status: st(gpus)}}
		return sc
	}
	on := &sunkv1.NodeSet{Spec: sunkv1.NodeSetSpec{Containers: &sunkv1.NodeSetContainers{Enabled: true}}}
	off := &sunkv1.NodeSet{Spec: sunkv1.NodeSetSpec{Containers: &sunkv1.NodeSetContainers{}}}
	gpusAndContainers := on.DeepCopy()
	gpusAndContainers.Spec.Resources.Limits = corev1.ResourceList{wellknown.ResourceGPU: resource.MustParse("8")}
	for _, c := range []struct {
		name   string
		ns     *sunkv1.NodeSet
		sc     *sunkv1.SlurmCluster
		reason string
	}{
		{"containers, plugin not running yet", on, cluster(false, false), sunkv1.ReasonWaitingForContainersConfig},
		{"containers, plugin running", on, cluster(true, false), ""},
		{"containers disabled", off, cluster(false, false), ""},
		{"GPUs first", gpusAndContainers, cluster(false, false), sunkv1.ReasonWaitingForGPUConfig},
		{"then containers", gpusAndContainers, cluster(false, true), sunkv1.ReasonWaitingForContainersConfig},
	} {
		reason, msg := createWait(c.ns, c.sc)
		if reason != c.reason || (reason == "") != (msg == "") {
			t.Errorf("%s: createWait = %q, %q; want reason %q", c.name, reason, msg, c.reason)
		}
	}
}
