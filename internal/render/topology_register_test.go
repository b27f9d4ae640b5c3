package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

func TestRegistrationTopology(t *testing.T) {
	tree := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	block := &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{2, 4}}}
	both := &sunkv1.TopologySpec{Tree: tree.Tree, Block: block.Block}
	aws := wellknown.TreePresetLabels[string(sunkv1.PresetAWS)]
	clique := wellknown.BlockPresetLabel[string(sunkv1.PresetNVIDIAGPUClique)]
	node := func(name string, kv ...string) *TopologyNode {
		l := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return &TopologyNode{Name: name, Labels: l}
	}
	awsNode := func(name, spine, leaf string) *TopologyNode {
		return node(name, aws[0], "nn-top", aws[1], spine, aws[2], leaf)
	}
	file := func(spec *sunkv1.TopologySpec, nodes ...*TopologyNode) string {
		var in []TopologyNode
		for _, n := range nodes {
			in = append(in, *n)
		}
		topo, err := RenderTopology(spec, in)
		if err != nil {
			t.Fatal(err)
		}
		y, err := RenderTopologyYAML([]NamedTopology{{Name: TopologyKind(topo), Default: true, Topology: topo}})
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	running := file(tree, awsNode("gpu-0", "spine-1", "leaf-a"), awsNode("gpu-1", "spine-1", "leaf-b"), node("gpu-9"))
	blocks := file(block, node("b-0", clique, "dom.1"), node("b-1", clique, "dom.1"))
	for _, c := range []struct {
		name    string
		spec    *sunkv1.TopologySpec
		byStr   bool
		running string
		node    *TopologyNode
		want    string
	}{
		{"leaf the file has", tree, true, running, awsNode("new", "spine-1", "leaf-b"), "tree:nn-top:spine-1-sw:leaf-b"},
		{"a new leaf under a known spine waits for the file", tree, true, running, awsNode("new", "spine-1", "leaf-c"), ""},
		{"a new top switch would be refused", tree, true, running, node("new", aws[0], "nn-other", aws[1], "spine-1", aws[2], "leaf-b"), ""},
		{"the same leaf name under another spine", tree, true, running, awsNode("new", "spine-2", "leaf-a"), ""},
		{"unlabelled: no string, though the file has unknown", tree, true, running, node("new"), ""},
		{"24.11 takes no topology_str", tree, false, running, awsNode("new", "spine-1", "leaf-b"), ""},
		{"running file unknown", tree, true, "", awsNode("new", "spine-1", "leaf-b"), ""},
		{"running file unreadable", tree, true, "SwitchName=x Nodes=y\n", awsNode("new", "spine-1", "leaf-b"), ""},
		{"Replicas mode: the node is not known", tree, true, running, nil, ""},
		{"no spec.topology", nil, true, running, awsNode("new", "spine-1", "leaf-b"), ""},
		{"tree and block together", both, true, running, awsNode("new", "spine-1", "leaf-b"), ""},
		{"the file is of the other kind", block, true, running, node("new", clique, "dom.1"), ""},
		{"block the file has, below the base size alone", block, true, blocks, node("new", clique, "dom.1"), "block:dom.1-blk"},
		{"block the file lacks", block, true, blocks, node("new", clique, "dom.2"), ""},
		{"annotation wins over labels", tree, true, running, &TopologyNode{Name: "new", Labels: awsNode("", "spine-1", "leaf-c").Labels,
			Annotations: map[string]string{wellknown.AnnotationTopologyTree: "nn-top/spine-1/leaf-a"}}, "tree:nn-top:spine-1-sw:leaf-a"},
	} {
		if got := RegistrationTopology(c.spec, c.byStr, c.running, c.node); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The string goes on the pod's node line, and not into the template hash: pods made before
// (without one) are not outdated, and a NodeSet of a cluster without spec.topology renders
// the same pod as before.
func TestComputePodRegistrationTopology(t *testing.T) {
	ns := &sunkv1.NodeSet{}
	ns.Name, ns.Namespace = "gpu", "slurm"
	sc := &sunkv1.SlurmCluster{}
	sc.Name, sc.Namespace = "c", "slurm"
	n := clusternames.For(sc, "cluster.local")
	without := ComputePod(ns, sc, n, ComputeMember{Name: "gpu-0"})
	with := ComputePod(ns, sc, n, ComputeMember{Name: "gpu-0", Topology: "tree:s:l"})
	if without.Labels[wellknown.LabelTemplateHash] != with.Labels[wellknown.LabelTemplateHash] {
		t.Errorf("Topology changed the template hash")
	}
	if got := clusternames.RegisteredTopology(with); got != "tree:s:l" {
		t.Errorf("RegisteredTopology: %q", got)
	}
	if got := clusternames.RegisteredTopology(without); got != "" {
		t.Errorf("RegisteredTopology without: %q", got)
	}
	line := envOf(with, clusternames.EnvSlurmdConf)
	if !strings.HasSuffix(line, " Topology=tree:s:l") {
		t.Errorf("node line %q", line)
	}
	if strings.Contains(envOf(without, clusternames.EnvSlurmdConf), "Topology") {
		t.Errorf("node line without: %q", envOf(without, clusternames.EnvSlurmdConf))
	}
	// extraConf's Topology is the user's: sunk adds none beside it.
	ns.Spec.ExtraConf = "Topology=tree:mine"
	if got := clusternames.RegisteredTopology(ComputePod(ns, sc, n, ComputeMember{Name: "gpu-0", Topology: "tree:s:l"})); got != "tree:mine" {
		t.Errorf("with extraConf: %q", got)
	}
}

func envOf(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
