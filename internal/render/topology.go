package render

import (
	"fmt"
	"sort"
	"strings"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// TopologyNode is a compute node as the topology sees it: its Slurm node name (the compute
// pod's name) and the labels and annotations of the Kubernetes node its pod runs on.
type TopologyNode struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// Topology is a rendered topology.conf and what it found.
type Topology struct {
	// Conf is topology.conf.
	Conf string
	// Plugin is the topology plugin of the spec's kind. slurm.conf names it only once Conf
	// places a node: see SlurmPlugin.
	Plugin string
	// Nodes placed in the file, Unlabelled (under "unknown") among them, and Excluded: in
	// an undersized block, so in no block at all.
	Nodes, Unlabelled, Excluded int
	// Problems say what was left out and why, for the TopologyReady condition.
	Problems []string
	// Renamed are the label values written under another name ('"a b" as a_b').
	Renamed []string
	// Switches (tree), or BlockSizes and Blocks (block): what Conf says, for topology.yaml
	// (RenderTopologyYAML).
	Switches   []TopologyUnit
	BlockSizes []int
	Blocks     []TopologyUnit
	// Places are each placed node's switches, outermost first, down to its leaf (tree), or
	// its block: the unit part of Slurm's topology_str (TopologyStr). A node left out (in
	// an undersized block) has none.
	Places map[string][]string
	// Kept, when set, is topology.yaml as written before, to be written again instead of a
	// rendering of this topology: the file slurmctld runs with while a change settles
	// (TopologyFile). topology.conf's kept text is Conf itself.
	Kept string
	// Also is the block topology rendered from the same nodes when the spec has tree and
	// block together (Slurm 25.05 and later): the receiver is then the tree, topology.yaml's
	// cluster default, and Also its second topology (TopologyFile).
	Also *Topology
}

// TopologyUnit is a switch or a block: its name, its nodes (a hostlist), and a switch's
// child switches (comma-separated).
type TopologyUnit struct {
	Name, Nodes, Children string
}

// SlurmPlugin is the TopologyPlugin slurm.conf names beside Conf: Plugin once Conf has a
// switch or a block, none before (a new cluster before any compute pod is Ready, or every
// block below the base size). slurmctld 26.05 stops on a tree without switches or blocks
// without a block ("fatal: No switches/blocks configured, failed to create context for
// topology plugin", switch_record.c and block_record.c); 24.11 logs an error and places
// nothing. Without the line both run Slurm's default, which places nothing either, and the
// reconfigure that brings the first switch or block loads the plugin (it re-executes
// slurmctld). It reads Conf, not the nodes, so a copy holding another file (the one kept
// while a change settles) names the plugin that file needs.
func (t *Topology) SlurmPlugin() string {
	for _, l := range strings.Split(t.Conf, "\n") {
		if strings.HasPrefix(l, "SwitchName=") || strings.HasPrefix(l, "BlockName=") {
			return t.Plugin
		}
	}
	return ""
}

// noTopologyYet closes a topology.conf without a switch or block.
const noTopologyYet = "# No node placed yet: slurm.conf names no TopologyPlugin until one is.\n"

// UnknownTopologyName is the switch or block of nodes whose labels say nothing.
const UnknownTopologyName = "unknown"

// maxTopologyName is the longest switch or block name sunk writes: Slurm refuses names of
// HOST_NAME_MAX (64) characters or more.
const maxTopologyName = 60

// TreeLabelKeys are the label keys of a tree topology, outermost first.
func TreeLabelKeys(t *sunkv1.TreeTopology) []string {
	if t.Preset != "" {
		return wellknown.TreePresetLabels[string(t.Preset)]
	}
	return t.LabelKeys
}

// BlockLabelKey is the label key of a block topology.
func BlockLabelKey(b *sunkv1.BlockTopology) string {
	if b.Preset != "" {
		return wellknown.BlockPresetLabel[string(b.Preset)]
	}
	return b.LabelKey
}

// RenderTopology renders topology.conf for the nodes; with tree and block both in the spec,
// the tree with the blocks in Also (for topology.yaml only). The output depends only on the set of
// nodes and their labels (sorted, hostlist-compressed), so an unchanged cluster renders the
// same bytes and causes no reconfigure. Every name it writes is one slurmctld reads safely:
// see topologyNames.
func RenderTopology(spec *sunkv1.TopologySpec, nodes []TopologyNode) (*Topology, error) {
	switch {
	case spec == nil:
		return nil, fmt.Errorf("topology: no spec")
	case spec.Tree != nil && spec.Block == nil:
		return renderTree(TreeLabelKeys(spec.Tree), nodes)
	case spec.Block != nil && spec.Tree == nil:
		return renderBlocks(spec.Block, nodes)
	case spec.Block != nil:
		tree, err := renderTree(TreeLabelKeys(spec.Tree), nodes)
		if err != nil {
			return nil, err
		}
		if tree.Also, err = renderBlocks(spec.Block, nodes); err != nil {
			return nil, err
		}
		return tree, nil
	}
	return nil, fmt.Errorf("topology: neither tree nor block is set")
}

// treePath is a node's switches, outermost first; nil when its labels place it nowhere.
func treePath(keys []string, n TopologyNode) []string {
	if a, ok := n.Annotations[wellknown.AnnotationTopologyTree]; ok {
		parts := strings.Split(a, "/")
		for _, p := range parts {
			if strings.TrimSpace(p) == "" {
				return nil
			}
		}
		return parts
	}
	first := -1
	for i, k := range keys {
		if n.Labels[k] != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	path := make([]string, 0, len(keys)-first)
	for _, k := range keys[first:] {
		v := n.Labels[k]
		if v == "" { // a gap, or no leaf
			return nil
		}
		path = append(path, v)
	}
	return path
}

// treeSwitch is one switch: its identity is its whole path from the top and its distance
// from the nodes, so equal values under different parents are different switches.
type treeSwitch struct {
	id       string
	value    string
	level    int // 0: leaf
	nodes    []string
	children map[string]bool
}

func renderTree(keys []string, nodes []TopologyNode) (*Topology, error) {
	switches := map[string]*treeSwitch{}
	var unknown []string
	for _, n := range nodes {
		path := treePath(keys, n)
		if path == nil {
			unknown = append(unknown, n.Name)
			continue
		}
		child := ""
		for depth := len(path) - 1; depth >= 0; depth-- {
			level := len(path) - 1 - depth
			id := fmt.Sprintf("%d\x00%s", level, strings.Join(path[:depth+1], "\x00"))
			sw := switches[id]
			if sw == nil {
				sw = &treeSwitch{id: id, value: path[depth], level: level, children: map[string]bool{}}
				switches[id] = sw
			}
			if level == 0 {
				sw.nodes = append(sw.nodes, n.Name)
			} else {
				sw.children[child] = true
			}
			child = id
		}
	}
	ids := make([]string, 0, len(switches))
	for id := range switches {
		ids = append(ids, id)
	}
	values := map[string]string{}
	for id, sw := range switches {
		values[id] = sw.value
	}
	names, err := topologyNames(values, "-sw")
	if err != nil {
		return nil, err
	}
	// Leaves first, then each level up, by name: the order of Slurm's own examples.
	sort.Slice(ids, func(a, b int) bool {
		sa, sb := switches[ids[a]], switches[ids[b]]
		if sa.level != sb.level {
			return sa.level < sb.level
		}
		return names[sa.id] < names[sb.id]
	})
	var b strings.Builder
	b.WriteString(topologyHeader("tree", keys))
	t := &Topology{Plugin: "topology/tree", Nodes: len(nodes), Unlabelled: len(unknown), Renamed: renamed(values, names, "-sw"), Places: map[string][]string{}}
	for _, n := range nodes {
		path := treePath(keys, n)
		if path == nil {
			t.Places[n.Name] = []string{UnknownTopologyName}
			continue
		}
		place := make([]string, len(path))
		for depth := range path {
			place[depth] = names[fmt.Sprintf("%d\x00%s", len(path)-1-depth, strings.Join(path[:depth+1], "\x00"))]
		}
		t.Places[n.Name] = place
	}
	for _, id := range ids {
		sw := switches[id]
		if sw.level == 0 {
			u := TopologyUnit{Name: names[id], Nodes: slurm.CompressHostlist(sw.nodes)}
			t.Switches = append(t.Switches, u)
			fmt.Fprintf(&b, "SwitchName=%s Nodes=%s\n", u.Name, u.Nodes)
			continue
		}
		var children []string
		for c := range sw.children {
			children = append(children, names[c])
		}
		sort.Strings(children)
		u := TopologyUnit{Name: names[id], Children: strings.Join(children, ",")}
		t.Switches = append(t.Switches, u)
		fmt.Fprintf(&b, "SwitchName=%s Switches=%s\n", u.Name, u.Children)
	}
	if len(unknown) > 0 {
		t.Switches = append(t.Switches, TopologyUnit{Name: UnknownTopologyName, Nodes: slurm.CompressHostlist(unknown)})
		fmt.Fprintf(&b, "# Nodes whose Kubernetes node lacks the labels.\nSwitchName=%s Nodes=%s\n", UnknownTopologyName, slurm.CompressHostlist(unknown))
		t.Problems = append(t.Problems, fmt.Sprintf("%d nodes lack the labels %s and sit under the switch %q", len(unknown), strings.Join(keys, ", "), UnknownTopologyName))
	}
	if len(nodes) == 0 {
		b.WriteString(noTopologyYet)
	}
	t.Conf = b.String()
	return t, nil
}

func renderBlocks(spec *sunkv1.BlockTopology, nodes []TopologyNode) (*Topology, error) {
	key := BlockLabelKey(spec)
	members := map[string][]string{}
	var unknown []string
	for _, n := range nodes {
		v, ok := n.Annotations[wellknown.AnnotationTopologyBlock]
		if !ok {
			v = n.Labels[key]
		}
		if strings.TrimSpace(v) == "" {
			unknown = append(unknown, n.Name)
			continue
		}
		members[v] = append(members[v], n.Name)
	}
	values := map[string]string{}
	for v := range members {
		values[v] = v
	}
	names, err := topologyNames(values, "-blk")
	if err != nil {
		return nil, err
	}
	type block struct {
		name  string
		nodes []string
	}
	var blocks []block
	for v, ns := range members {
		blocks = append(blocks, block{names[v], ns})
	}
	// Slurm aggregates consecutive blocks: name order keeps the aggregates stable.
	sort.Slice(blocks, func(a, b int) bool { return blocks[a].name < blocks[b].name })
	if len(unknown) > 0 {
		blocks = append(blocks, block{UnknownTopologyName, unknown})
	}

	// 24.11's block plugin stops slurmctld when a block has fewer nodes than the base
	// block (block_record.c: "children count lower than bblock_node_cnt").
	base := 0
	sizes := make([]int, 0, len(spec.BlockSizes))
	for _, s := range spec.BlockSizes {
		sizes = append(sizes, int(s))
	}
	if len(sizes) > 0 {
		base = sizes[0]
	} else {
		for i, bl := range blocks {
			if bl.name == UnknownTopologyName && i > 0 {
				continue // an odd few unlabelled nodes must not shrink every block
			}
			if base == 0 || len(bl.nodes) < base {
				base = len(bl.nodes)
			}
		}
		for f := 1; f <= 16; f *= 2 {
			sizes = append(sizes, base*f)
		}
	}
	t := &Topology{Plugin: "topology/block", Unlabelled: len(unknown), Renamed: renamed(values, names, "-blk"), Places: map[string][]string{}}
	var b strings.Builder
	b.WriteString(topologyHeader("block", []string{key}))
	var body strings.Builder
	var left []string
	for _, bl := range blocks {
		if len(bl.nodes) < base {
			left = append(left, bl.nodes...)
			t.Excluded += len(bl.nodes)
			t.Problems = append(t.Problems, fmt.Sprintf("block %q has %d nodes, fewer than the base block size %d: its nodes are in no block", bl.name, len(bl.nodes), base))
			continue
		}
		t.Nodes += len(bl.nodes)
		for _, n := range bl.nodes {
			t.Places[n] = []string{bl.name}
		}
		if bl.name == UnknownTopologyName {
			body.WriteString("# Nodes whose Kubernetes node lacks the label.\n")
		}
		u := TopologyUnit{Name: bl.name, Nodes: slurm.CompressHostlist(bl.nodes)}
		t.Blocks = append(t.Blocks, u)
		fmt.Fprintf(&body, "BlockName=%s Nodes=%s\n", u.Name, u.Nodes)
	}
	if body.Len() > 0 {
		t.BlockSizes = sizes
		strs := make([]string, len(sizes))
		for i, s := range sizes {
			strs[i] = fmt.Sprint(s)
		}
		fmt.Fprintf(&b, "BlockSizes=%s\n", strings.Join(strs, ","))
		b.WriteString(body.String())
	}
	if len(left) > 0 {
		fmt.Fprintf(&b, "# In no block (their block has fewer nodes than the base block, %d): %s\n", base, slurm.CompressHostlist(left))
	}
	if len(unknown) > 0 {
		t.Problems = append(t.Problems, fmt.Sprintf("%d nodes lack the label %s and form the block %q", len(unknown), key, UnknownTopologyName))
	}
	if body.Len() == 0 {
		b.WriteString(noTopologyYet)
	}
	t.Conf = b.String()
	return t, nil
}

// topologyHeaderPrefix begins topology.conf's first line, which names its kind and keys.
const topologyHeaderPrefix = "# Rendered by sunk: topology/"

func topologyHeader(kind string, keys []string) string {
	return fmt.Sprintf("%s%s from the Kubernetes node labels %s.\n", topologyHeaderPrefix, kind, strings.Join(keys, ", "))
}
