//go:build integration

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestTopologyFromNodeLabels: the operator renders topology.conf (24.11) or topology.yaml
// (26.05) from the labels of the Kubernetes nodes the cluster's Ready compute pods run on,
// reports unlabelled nodes in TopologyReady, applies a relabel once the nodes have settled,
// and writes a scale-up of several pods as one change.
func TestTopologyFromNodeLabels(t *testing.T) {
	// Each release's file, and how it lists what the steps below look for.
	t.Run("24.11", func(t *testing.T) {
		testTopologyFromNodeLabels(t, sunkv1.SlurmVersion2411, "topology.conf", []string{
			"SwitchName=leaf-a Nodes=gpu-0\nSwitchName=leaf-b Nodes=gpu-1\nSwitchName=spine-1-sw Switches=leaf-a,leaf-b\n# Nodes whose Kubernetes node lacks the labels.\nSwitchName=unknown Nodes=gpu-2\n",
			"SwitchName=leaf-a Nodes=gpu-[0,2]\nSwitchName=leaf-b Nodes=gpu-1\nSwitchName=spine-1-sw Switches=leaf-a,leaf-b\n",
			"SwitchName=leaf-b Nodes=gpu-[1,4-7]\n",
		})
	})
	t.Run("26.05", func(t *testing.T) {
		sw := func(name, nodes string) string {
			return fmt.Sprintf("      - switch: %q\n        nodes: %q\n", name, nodes)
		}
		testTopologyFromNodeLabels(t, sunkv1.SlurmVersion2605, "topology.yaml", []string{
			sw("leaf-a", "gpu-0") + sw("leaf-b", "gpu-1") + "      - switch: \"spine-1-sw\"\n        children: \"leaf-a,leaf-b\"\n" + sw("unknown", "gpu-2"),
			sw("leaf-a", "gpu-[0,2]") + sw("leaf-b", "gpu-1") + "      - switch: \"spine-1-sw\"\n",
			sw("leaf-b", "gpu-[1,4-7]"),
		})
	})
}

// testTopologyFromNodeLabels runs the steps on a cluster of version, whose file must show
// wants: the first rendering, the relabelled one, the scaled one.
func testTopologyFromNodeLabels(t *testing.T, version, file string, wants []string) {
	h := start(t)
	ctx := context.Background()
	const spine, leaf = "example.com/spine", "example.com/leaf"
	nodes := map[string]map[string]string{
		"k8s-a": {spine: "spine-1", leaf: "leaf-a"},
		"k8s-b": {spine: "spine-1", leaf: "leaf-b"},
		"k8s-c": {}, // no labels: the switch "unknown"
	}
	for name, l := range nodes {
		if err := h.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}); err != nil {
			t.Fatal(err)
		}
	}
	computePod := func(pod, node string, ready bool) {
		t.Helper()
		p := &corev1.Pod{
			// The release label: a pod without it runs 24.11, and the configuration is
			// rendered for the oldest release running.
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: pod, Labels: map[string]string{wellknown.LabelCluster: "topo",
				wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelSlurmVersion: version}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "slurmd", Image: "sunk.dev/slurm:" + version + "-local"}}},
		}
		if err := h.c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if !ready {
			return
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := h.c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	computePod("gpu-0", "k8s-a", true)
	computePod("gpu-1", "k8s-b", true)
	computePod("gpu-2", "k8s-c", true)
	// gpu-3's slurmd is not up yet: Slurm does not know its node, so it stays out.
	computePod("gpu-3", "k8s-a", false)
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "topo"},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: version, Image: sunkv1.Image("sunk.dev/slurm:" + version + "-local"),
			Topology: &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{spine, leaf}}}},
	}
	if err := h.c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}

	topologyConf := func() (string, string) {
		var cm corev1.ConfigMap
		if err := h.get(t, "topo-config", &cm); err != nil {
			return "", ""
		}
		if _, other := cm.Data[map[string]string{"topology.conf": "topology.yaml", "topology.yaml": "topology.conf"}[file]]; other {
			return "both topology files", ""
		}
		return cm.Data[file], cm.Data["slurm.conf"]
	}
	eventually(t, file, func() error {
		topo, conf := topologyConf()
		// topology.yaml replaces TopologyPlugin.
		if !strings.Contains(topo, wants[0]) || strings.Contains(conf, "\nTopologyPlugin=topology/tree\n") != (file == "topology.conf") {
			return fmt.Errorf("%s:\n%s", file, topo)
		}
		return nil
	})
	eventually(t, "TopologyReady", func() error {
		sc := h.cluster(t, "topo")
		c := condition(sc, sunkv1.ConditionTopologyReady)
		if c.Reason != sunkv1.ReasonTopologyUnlabelled || sc.Status.Topology == nil || *sc.Status.Topology != (sunkv1.TopologyStatus{Nodes: 3, UnlabelledNodes: 1}) {
			return fmt.Errorf("TopologyReady %+v, status %+v", c, sc.Status.Topology)
		}
		return nil
	})

	// Relabelling k8s-c moves gpu-2 under leaf-a, after the settle time.
	node := &corev1.Node{}
	if err := h.get(t, "k8s-c", node); err != nil {
		t.Fatal(err)
	}
	node.Labels = map[string]string{spine: "spine-1", leaf: "leaf-a"}
	if err := h.c.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	relabelled := time.Now()
	eventually(t, "relabelled "+file, func() error {
		if topo, _ := topologyConf(); !strings.Contains(topo, wants[1]) || strings.Contains(topo, "unknown") {
			return fmt.Errorf("%s:\n%s", file, topo)
		}
		return nil
	})
	if took := time.Since(relabelled); took < slurmcluster.DefaultTopologySettle-time.Second {
		t.Errorf("the relabel reached %s after %v, before the nodes settled", file, took)
	}
	t.Logf("the relabel reached %s after %v", file, time.Since(relabelled).Round(100*time.Millisecond))
	eventually(t, "TopologyReady True", func() error {
		if c := condition(h.cluster(t, "topo"), sunkv1.ConditionTopologyReady); c.Reason != sunkv1.ReasonTopologyPlaced {
			return fmt.Errorf("TopologyReady %+v", c)
		}
		return nil
	})

	// A scale-up: four pods turn Ready 1.5 s apart. topology.conf changes once, with all
	// four, not once per pod (each change would be a reconfigure).
	seen := map[string]bool{}
	before, _ := topologyConf()
	seen[before] = true
	stop := make(chan struct{})
	sampled := make(chan []string)
	go func() {
		var versions []string
		for {
			select {
			case <-stop:
				sampled <- versions
				return
			case <-time.After(100 * time.Millisecond):
			}
			if topo, _ := topologyConf(); topo != "" && !seen[topo] {
				seen[topo] = true
				versions = append(versions, topo)
			}
		}
	}()
	for i := 4; i < 8; i++ {
		computePod(fmt.Sprintf("gpu-%d", i), "k8s-b", true)
		time.Sleep(1500 * time.Millisecond)
	}
	eventually(t, "the scaled "+file, func() error {
		if topo, _ := topologyConf(); !strings.Contains(topo, wants[2]) {
			return fmt.Errorf("%s:\n%s", file, topo)
		}
		return nil
	})
	time.Sleep(time.Second)
	close(stop)
	if versions := <-sampled; len(versions) != 1 {
		t.Errorf("a scale-up of four pods wrote %s %d times:\n%s", file, len(versions), strings.Join(versions, "--\n"))
	}
}
