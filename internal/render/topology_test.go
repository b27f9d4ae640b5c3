package render

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// Real label values, as providers and tools write them.
const (
	awsL1 = "topology.k8s.aws/network-node-layer-1"
	awsL2 = "topology.k8s.aws/network-node-layer-2"
	awsL3 = "topology.k8s.aws/network-node-layer-3"
)

func awsNode(name, l1, l2, l3 string) TopologyNode {
	labels := map[string]string{"node.kubernetes.io/instance-type": "p5.48xlarge"}
	for k, v := range map[string]string{awsL1: l1, awsL2: l2, awsL3: l3} {
		if v != "" {
			labels[k] = v
		}
	}
	return TopologyNode{Name: name, Labels: labels}
}

// awsNodes: two layer-3 network nodes under one spine, one under another, a node in a
// Kubernetes node without the labels (a CPU node) and one whose layer-3 label is missing.
func awsNodes() []TopologyNode {
	return []TopologyNode{
		awsNode("gpu-0", "nn-1b2a3c4d5e6f70811", "nn-4f3e2d1c0b0a09182", "nn-9a8b7c6d5e4f30211"),
		awsNode("gpu-1", "nn-1b2a3c4d5e6f70811", "nn-4f3e2d1c0b0a09182", "nn-9a8b7c6d5e4f30211"),
		awsNode("gpu-2", "nn-1b2a3c4d5e6f70811", "nn-4f3e2d1c0b0a09182", "nn-0c1d2e3f4a5b6c7d8"),
		awsNode("gpu-3", "nn-1b2a3c4d5e6f70811", "nn-77aa66bb55cc44dd3", "nn-aa11bb22cc33dd44e"),
		awsNode("gpu-4", "", "", ""),
		awsNode("gpu-5", "nn-1b2a3c4d5e6f70811", "nn-4f3e2d1c0b0a09182", ""),
	}
}

func cliqueNodes() []TopologyNode {
	var nodes []TopologyNode
	add := func(name, clique string) {
		l := map[string]string{"nvidia.com/gpu.product": "NVIDIA-GB200"}
		if clique != "" {
			l["nvidia.com/gpu.clique"] = clique
		}
		nodes = append(nodes, TopologyNode{Name: name, Labels: l})
	}
	for i := 0; i < 4; i++ {
		add(clusternames.OrdinalMemberName("gb200", i), "5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.1")
		add(clusternames.OrdinalMemberName("gb200", 4+i), "5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.2")
	}
	add("gb200-8", "5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.3") // a rack with one tray up
	add("gb200-9", "")
	return nodes
}

func TestTopologyGolden(t *testing.T) {
	cw := []TopologyNode{
		{Name: "h100-0", Labels: map[string]string{"ib.coreweave.cloud/fabric": "ib-fabric-us-east-04a", "ib.coreweave.cloud/superpod": "sp-3", "ib.coreweave.cloud/leafgroup": "lg-17"}},
		{Name: "h100-1", Labels: map[string]string{"ib.coreweave.cloud/fabric": "ib-fabric-us-east-04a", "ib.coreweave.cloud/superpod": "sp-3", "ib.coreweave.cloud/leafgroup": "lg-17"}},
		// The same leaf group name under another superpod is another switch.
		{Name: "h100-2", Labels: map[string]string{"ib.coreweave.cloud/fabric": "ib-fabric-us-east-04a", "ib.coreweave.cloud/superpod": "sp-4", "ib.coreweave.cloud/leafgroup": "lg-17"}},
		// Outer levels absent: the leaf group is a top-level switch.
		{Name: "h100-3", Labels: map[string]string{"ib.coreweave.cloud/leafgroup": "lg-2"}},
		// An admin's annotation wins over the labels.
		{Name: "h100-4", Labels: map[string]string{"ib.coreweave.cloud/leafgroup": "lg-9"}, Annotations: map[string]string{wellknown.AnnotationTopologyTree: "ib-fabric-us-east-04a/sp-4/lg-18"}},
	}
	for _, tc := range []struct {
		golden string
		spec   sunkv1.TopologySpec
		nodes  []TopologyNode
	}{
		{"topology.tree-aws.golden", sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}, awsNodes()},
		{"topology.tree-coreweave.golden", sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetCoreWeave}}, cw},
		{"topology.block-clique.golden", sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{4, 8, 16}}}, cliqueNodes()},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			topo, err := RenderTopology(&tc.spec, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.golden, topo.Conf)
			checkTopologyNames(t, topo.Conf)
			// The order the pods are listed in changes nothing.
			shuffled := append([]TopologyNode(nil), tc.nodes...)
			rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again, err := RenderTopology(&tc.spec, shuffled)
			if err != nil || again.Conf != topo.Conf {
				t.Errorf("rendering depends on node order: %v\n%s", err, again.Conf)
			}
		})
	}
}

var safeTopologyName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,58}[A-Za-z_.-]$`)

// checkTopologyNames: every switch and block name is safe for slurmctld and defined once.
func checkTopologyNames(t *testing.T, conf string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range strings.Split(conf, "\n") {
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			var names []string
			switch k {
			case "SwitchName", "BlockName":
				names = []string{v}
				if seen[v] {
					t.Errorf("%s defined twice", v)
				}
				seen[v] = true
			case "Switches":
				names = strings.Split(v, ",")
			}
			for _, n := range names {
				if !safeTopologyName.MatchString(n) {
					t.Errorf("unsafe name %q in %q", n, line)
				}
			}
		}
	}
}

func TestTopologyNames(t *testing.T) {
	for _, tc := range []struct {
		values map[string]string
		want   map[string]string
	}{
		{map[string]string{"a": "leaf-a"}, map[string]string{"a": "leaf-a"}},
		// Soperator's crash: a name ending in a long digit run.
		{map[string]string{"a": "sw12345678901234567890"}, map[string]string{"a": "sw12345678901234567890-sw"}},
		{map[string]string{"a": "leaf1"}, map[string]string{"a": "leaf1-sw"}},
		// Nothing a value holds reaches the line as syntax.
		{map[string]string{"a": "x Nodes=evil#[1-2],y"}, map[string]string{"a": "x_Nodes_evil__1-2__y"}},
		{map[string]string{"a": "-lead"}, map[string]string{"a": "x-lead"}},
		// Collisions, and the reserved "unknown", end in a hash of the identity.
		{map[string]string{"a": "s/1x", "b": "s_1x"}, map[string]string{"a": "s_1x-" + letterHash("a"), "b": "s_1x-" + letterHash("b")}},
		{map[string]string{"a": "unknown"}, map[string]string{"a": "unknown-" + letterHash("a")}},
		{map[string]string{"a": strings.Repeat("z", 100)}, map[string]string{"a": strings.Repeat("z", 56)}},
	} {
		got, err := topologyNames(tc.values, "-sw")
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range tc.want {
			if got[id] != want {
				t.Errorf("%q: got %q, want %q", tc.values[id], got[id], want)
			}
			if !safeTopologyName.MatchString(got[id]) {
				t.Errorf("%q: unsafe %q", tc.values[id], got[id])
			}
		}
	}
}

func TestTopologyRenamedValues(t *testing.T) {
	nodes := []TopologyNode{
		{Name: "a-0", Labels: map[string]string{"rack": "r 1"}},
		{Name: "a-1", Labels: map[string]string{"rack": "r7"}},
		{Name: "a-2", Labels: map[string]string{"rack": "unknown"}},
	}
	topo, err := RenderTopology(&sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"rack"}}}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	// r7 only gained the suffix for its trailing digit: not worth a word.
	want := []string{`"r 1" as r_1-sw`, `"unknown" as unknown-` + letterHash("0\x00unknown")}
	if strings.Join(topo.Renamed, "|") != strings.Join(want, "|") {
		t.Errorf("renamed %q, want %q", topo.Renamed, want)
	}
}

func TestTopologyCounts(t *testing.T) {
	tree := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	block := func(sizes ...int32) *sunkv1.TopologySpec {
		return &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: sizes}}
	}
	for _, tc := range []struct {
		name                          string
		spec                          *sunkv1.TopologySpec
		nodes                         []TopologyNode
		nodesOut, unlabelled, exclude int
		contains                      []string
	}{
		{"tree, unlabelled and gap", tree, awsNodes(), 6, 2, 0, []string{"SwitchName=unknown Nodes=gpu-[4-5]\n"}},
		{"tree, no nodes", tree, nil, 0, 0, 0, []string{noTopologyYet}},
		{"tree, unlabelled only", tree, awsNodes()[4:5], 1, 1, 0, []string{"SwitchName=unknown Nodes=gpu-4\n"}},
		// The base is the smallest labelled block: the one-node rack makes it 1.
		{"block, default sizes", block(), cliqueNodes(), 10, 1, 0, []string{"BlockSizes=1,2,4,8,16\n"}},
		// Without it the base is 4, and the one unlabelled node is left out.
		{"block, default sizes, full racks", block(), cliqueNodes()[:8], 8, 0, 0, []string{"BlockSizes=4,8,16,32,64\n"}},
		{"block, unlabelled below the base", block(), append(cliqueNodes()[:8], cliqueNodes()[9]), 8, 1, 1, []string{"BlockSizes=4,8,16,32,64\n"}},
		// The admin's base leaves the one-node rack and the unlabelled node out.
		{"block, sizes given", block(4, 8), cliqueNodes(), 8, 1, 2, []string{"BlockSizes=4,8\n"}},
		{"block, base 1 keeps every node", block(1, 2, 4), cliqueNodes(), 10, 1, 0, []string{"BlockName=unknown Nodes=gb200-9\n"}},
		{"block, no nodes", block(), nil, 0, 0, 0, []string{noTopologyYet}},
		// Every block below the admin's base: no block at all.
		{"block, every block below the base", block(16, 32), cliqueNodes(), 0, 1, 10, []string{noTopologyYet}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := RenderTopology(tc.spec, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if topo.Nodes != tc.nodesOut || topo.Unlabelled != tc.unlabelled || topo.Excluded != tc.exclude {
				t.Errorf("nodes %d unlabelled %d excluded %d, want %d %d %d\n%s", topo.Nodes, topo.Unlabelled, topo.Excluded, tc.nodesOut, tc.unlabelled, tc.exclude, topo.Conf)
			}
			for _, c := range tc.contains {
				if !strings.Contains(topo.Conf, c) {
					t.Errorf("missing %q in\n%s", c, topo.Conf)
				}
			}
			if len(tc.nodes) == 0 && strings.Contains(topo.Conf, "Name=") {
				t.Errorf("no nodes, but\n%s", topo.Conf)
			}
			// slurmctld 26.05 stops on a topology plugin without a switch or block.
			if want := map[bool]string{true: topo.Plugin, false: ""}[tc.nodesOut > 0]; topo.SlurmPlugin() != want {
				t.Errorf("SlurmPlugin %q, want %q\n%s", topo.SlurmPlugin(), want, topo.Conf)
			}
			if strings.Contains(topo.Conf, noTopologyYet) != (tc.nodesOut == 0) {
				t.Errorf("the no-node comment does not match %d nodes:\n%s", tc.nodesOut, topo.Conf)
			}
			checkTopologyNames(t, topo.Conf)
		})
	}
}

func TestRenderConfigTopology(t *testing.T) {
	sc := minimal()
	cfg, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Files["topology.conf"]; ok || strings.Contains(cfg.Files["slurm.conf"], "TopologyPlugin") {
		t.Errorf("no spec.topology, but a topology")
	}
	sc.Spec.Topology = &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	// Before the controller has read any node: a file without switches, and no plugin to
	// read it (slurmctld 26.05 stops on an empty tree).
	empty, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, "")})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(empty.Files["slurm.conf"], "TopologyPlugin") || strings.Contains(empty.Files["topology.conf"], "SwitchName") {
		t.Errorf("slurm.conf:\n%s\ntopology.conf:\n%s", empty.Files["slurm.conf"], empty.Files["topology.conf"])
	}
	topo, err := RenderTopology(sc.Spec.Topology, awsNodes())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Files["topology.conf"] != topo.Conf || cfg.Hash == empty.Hash {
		t.Errorf("topology.conf is not the rendered one, or the hash missed it")
	}
	if !strings.Contains(cfg.Files["slurm.conf"], "\nTopologyPlugin=topology/tree\n") {
		t.Errorf("switches, but slurm.conf:\n%s", cfg.Files["slurm.conf"])
	}
	// While a change settles the controller keeps the file slurmctld has: the plugin
	// follows that file, not the nodes.
	kept := *topo
	kept.Conf = empty.Files["topology.conf"]
	cfg, err = RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), Topology: &kept})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cfg.Files["slurm.conf"], "TopologyPlugin") {
		t.Errorf("the kept topology.conf has no switch, but slurm.conf names a plugin:\n%s", cfg.Files["slurm.conf"])
	}
	// A topology change is a reconfigure (24.11 re-executes slurmctld), not a restart.
	if cfg.RestartHash != empty.RestartHash {
		t.Errorf("a topology change restarts slurmctld")
	}
}
