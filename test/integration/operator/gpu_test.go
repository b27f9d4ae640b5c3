//go:build integration

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestGPUNodeSetWaitsForTheDeviceInclude: a NodeSet with GPUs creates no pod until slurmctld
// runs the gres.conf that includes each pod's device lines (a slurmd registering before would
// report no GPUs, and Slurm would drain its node for good). The NodeSet says why it waits, and
// the SlurmCluster's status change, not a poll, brings its pod.
func TestGPUNodeSetWaitsForTheDeviceInclude(t *testing.T) {
	h := start(t)
	h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "g")
	h.runControlPlane(t, "g")
	h.node(t, "m1", nil)
	var conf corev1.ConfigMap
	if err := h.get(t, "g-config", &conf); err != nil {
		t.Fatal(err)
	}
	h.exec.deliver("g-controller-0", conf.Data["slurm.conf"])
	eventually(t, "configuration without GPUs applied", func() error {
		sc := h.cluster(t, "g")
		if c, g := condition(sc, sunkv1.ConditionConfigApplied), condition(sc, sunkv1.ConditionGPUDevicesIncluded); c.Status != metav1.ConditionTrue ||
			g.Status != metav1.ConditionFalse || g.Reason != sunkv1.ReasonNoGPUs {
			return fmt.Errorf("ConfigApplied %+v, GPUDevicesIncluded %+v", c, g)
		}
		return nil
	})

	ns := newNodeSet(h.ns, "gpu", "g")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(1))
	ns.Spec.Resources.Limits[wellknown.ResourceGPU] = resource.MustParse("2")
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// The cluster renders the Include, but slurmctld's pod does not see it yet: the NodeSet
	// waits, saying why, and has no pod.
	eventually(t, "Include rendered, not applied; NodeSet waiting", func() error {
		if err := h.get(t, "g-config", &conf); err != nil {
			return err
		}
		if !strings.Contains(conf.Data["gres.conf"], "Include "+render.GresNodeConfPath) {
			return fmt.Errorf("gres.conf %q", conf.Data["gres.conf"])
		}
		sc := h.cluster(t, "g")
		if c, g := condition(sc, sunkv1.ConditionConfigApplied), condition(sc, sunkv1.ConditionGPUDevicesIncluded); c.Reason != sunkv1.ReasonWaitingForKubelet ||
			g.Status != metav1.ConditionFalse {
			return fmt.Errorf("ConfigApplied %+v, GPUDevicesIncluded %+v", c, g)
		}
		n := h.nodeSet(t, "gpu")
		if c := nsCondition(n, sunkv1.ConditionReady); c.Reason != sunkv1.ReasonWaitingForGPUConfig || !strings.Contains(c.Message, "gpu-0") {
			return fmt.Errorf("NodeSet Ready %+v", c)
		}
		return h.event("gpu", sunkv1.ReasonWaitingForGPUConfig)
	})
	if got := h.allPods(t, "gpu"); len(got) != 0 {
		t.Fatalf("pods created before slurmctld runs the Include: %v", got)
	}

	// kubelet delivers the file, the controller reconfigures, and the pod follows.
	h.exec.deliver("g-controller-0", conf.Data["slurm.conf"])
	eventually(t, "Include applied", func() error {
		sc := h.cluster(t, "g")
		if c, g := condition(sc, sunkv1.ConditionConfigApplied), condition(sc, sunkv1.ConditionGPUDevicesIncluded); c.Status != metav1.ConditionTrue ||
			g.Status != metav1.ConditionTrue || sc.Status.ConfigHash != render.HashInSlurmConf(conf.Data["slurm.conf"]) {
			return fmt.Errorf("ConfigApplied %+v, GPUDevicesIncluded %+v", c, g)
		}
		return nil
	})
	h.readyNodeSet(t, "gpu", "gpu-0")
}
