//go:build integration

package slurm_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/privateslurm"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestTopologyRegistrationOnRealSlurm: on Slurm 25.05 and later a new compute pod registers
// already placed. The node line is the one sunk renders for a pod (render.ComputePod with the
// Topology= render.RegistrationTopology gives for its Kubernetes node's labels and the
// topology.yaml slurmctld runs); the dynamic slurmd registering with it is in its leaf at once
// (`scontrol show node` says Topology=, `scontrol show topology` lists it), with no file
// rewrite and no reconfigure. A node under a top switch the file lacks gets no string from
// RegistrationTopology, and the test shows why: registering with one anyway is refused
// (26.05.5: the node is made, then drained as INVALID_REG, "Failed to set topology"). Run
// it on the 26.05 test bed (SUNK_SLURM_VERSION=26.05).
func TestTopologyRegistrationOnRealSlurm(t *testing.T) {
	testenv.SlurmSince(t, "25.05", "takes no Topology= at registration")
	spec := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	var nodes []render.TopologyNode
	for n, leaf := range map[string]string{"gpu-0": leafA, "gpu-1": leafA, "gpu-2": leafB, "gpu-3": leafB} {
		nodes = append(nodes, render.TopologyNode{Name: n, Labels: awsLabels(leaf)})
	}
	running, err := render.RenderTopology(spec, nodes)
	must(t, err)
	y, err := render.RenderTopologyYAML([]render.NamedTopology{{Name: "tree", Default: true, Topology: running}})
	must(t, err)
	p := startPrivateSlurm(t, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, "", "", func(p *privateSlurm) {
		p.topologyYAML = y
		p.partitions = "PartitionName=all Nodes=ALL Default=YES State=UP\n"
		p.extraConf = "MaxNodeCount=8\n"
	})
	// The node line of a NodeSet's pod, as the NodeSet controller makes it.
	ns := &sunkv1.NodeSet{}
	ns.Name, ns.Namespace = "dyn", "slurm"
	sc := &sunkv1.SlurmCluster{}
	sc.Name, sc.Namespace = "c", "slurm"
	sc.Spec.Topology = spec
	podLine := func(name string, labels map[string]string) (line, str string) {
		str = render.RegistrationTopology(spec, true, y, &render.TopologyNode{Name: name, Labels: labels})
		pod := render.ComputePod(ns, sc, clusternames.For(sc, "cluster.local"), render.ComputeMember{Name: name, Topology: str})
		for _, e := range pod.Spec.Containers[0].Env {
			if e.Name == clusternames.EnvSlurmdConf {
				line = e.Value
			}
		}
		return line, str
	}
	ports := privateslurm.FreePorts(t, 2)
	register := func(name, addr, line string, port int) {
		p.AddHost(t, name, addr)
		p.NodeSpool(t, name)
		p.Start(t, name, "slurmd", "-D", "-Z", "--conf", fmt.Sprintf("CPUs=1 RealMemory=100 Port=%d %s", port, line))
	}
	showNode := func(name string) string {
		out, _ := p.Scontrol("show", "node", name)
		return out
	}

	// 1. A pod on a node of leaf B: its line says Topology=, and it is in leaf B the moment it
	// is registered.
	line, str := podLine("dyn-0", awsLabels(leafB))
	want := render.TopologyStr("tree", running.Places["gpu-2"])
	if str != want || !strings.Contains(line, " Topology="+want) {
		t.Fatalf("dyn-0's node line %q, want Topology=%s on it", line, want)
	}
	start := time.Now()
	register("dyn-0", "127.0.0.31", line, ports[0])
	wait.For(t, "dyn-0 registered", 60*time.Second, 200*time.Millisecond, func() error {
		if out, err := p.Run("sinfo", "-h", "-n", "dyn-0", "-o", "%t"); err != nil || out != "idle" {
			return fmt.Errorf("sinfo: %q %v", out, err)
		}
		return nil
	})
	t.Logf("dyn-0 registered idle after %v", time.Since(start).Round(time.Millisecond))
	if out := showNode("dyn-0"); !strings.Contains(out, "Topology="+want) {
		t.Errorf("scontrol show node dyn-0 does not say Topology=%s:\n%s", want, out)
	}
	topo, err := p.Scontrol("show", "topology", "tree")
	must(t, err)
	leafB := running.Places["gpu-2"][2]
	if !strings.Contains(topo, "SwitchName="+leafB+" ") || !switchHas(topo, leafB, "dyn-0") {
		t.Errorf("leaf %s does not list dyn-0:\n%s", leafB, topo)
	}

	// 2. A node under a top switch the file lacks: sunk renders no string for it (it
	// registers unplaced, and the next file places it) ...
	other := awsLabels(leafB)
	other[awsL1] = "nn-5e5e5e5e5e5e5e5e5"
	line, str = podLine("dyn-1", other)
	if str != "" || strings.Contains(line, "Topology=") {
		t.Fatalf("dyn-1 under an unknown top switch got %q (line %q)", str, line)
	}
	// ... because slurmctld refuses a registration naming it: the node is drained as an
	// invalid registration and runs nothing.
	bad := render.TopologyStr("tree", []string{"nn-5e5e5e5e5e5e5e5e5-sw", running.Places["gpu-2"][1], leafB})
	register("dyn-1", "127.0.0.32", line+" Topology="+bad, ports[1])
	wait.For(t, "dyn-1's registration refused", 60*time.Second, 200*time.Millisecond, func() error {
		out := showNode("dyn-1")
		if !strings.Contains(out, "INVAL") || !strings.Contains(out, "Failed to set topology") {
			return fmt.Errorf("scontrol show node dyn-1:\n%s", out)
		}
		return nil
	})
	t.Logf("dyn-1 with Topology=%s: %s", bad, firstLines(showNode("dyn-1"), "State=", "Reason="))
	if out, _ := p.Run("sinfo", "-h", "-n", "dyn-1", "-o", "%t"); out == "idle" {
		t.Errorf("dyn-1 is idle")
	}
	if switchHas(topo, leafB, "dyn-1") {
		t.Errorf("dyn-1 in leaf %s", leafB)
	}
}

// switchHas says whether switch sw of `scontrol show topology` lists node.
func switchHas(topo, sw, node string) bool {
	for _, l := range strings.Split(topo, "\n") {
		if strings.HasPrefix(l, "SwitchName="+sw+" ") {
			for _, f := range strings.Fields(l) {
				if nodes, ok := strings.CutPrefix(f, "Nodes="); ok {
					return strings.Contains(","+nodes+",", ","+node+",") || strings.Contains(nodes, node)
				}
			}
		}
	}
	return false
}

// firstLines are the fields of out that start with one of prefixes.
func firstLines(out string, prefixes ...string) string {
	var got []string
	for _, f := range strings.Fields(out) {
		for _, p := range prefixes {
			if strings.HasPrefix(f, p) {
				got = append(got, f)
			}
		}
	}
	return strings.Join(got, " ")
}
