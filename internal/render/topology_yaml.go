package render

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Slurm 25.05 and later read topology.yaml beside slurm.conf: several named topologies, tree
// and block together, each partition choosing one with Topology=<name>, the first with
// cluster_default for the others and for cluster-wide traffic. When the file exists Slurm
// ignores topology.conf and TopologyPlugin (src/interfaces/topology.c, topology_g_init).
// Slurm 24.11 does not read it: topology.conf stays the default, and topology.yaml is
// rendered only when the caller says the cluster's Slurm reads it.

// TopologyYAMLFile is the file's name in the configuration directory.
const TopologyYAMLFile = "topology.yaml"

// topologyName is a topology's name: what a partition line carries after Topology=.
var topologyName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,59}$`)

// NamedTopology is one topology of topology.yaml: its name (what a partition's Topology=
// says), whether it is the cluster default, and the rendered topology (RenderTopology).
type NamedTopology struct {
	Name    string
	Default bool
	*Topology
}

// RenderTopologyYAML renders topology.yaml from topologies rendered by RenderTopology, in
// the order given; names must be distinct, and exactly one topology is the default (Slurm
// takes the first default and else none). A topology without nodes is written `flat: true`:
// Slurm 26.05 stops on a tree or block without switches or blocks, and a partition naming
// it must still find it. Every name and node list is one RenderTopology wrote (letters,
// digits, '_', '-', '.', hostlist brackets), quoted all the same.
func RenderTopologyYAML(topos []NamedTopology) (string, error) {
	seen, defaults := map[string]bool{}, 0
	var b strings.Builder
	b.WriteString("# Rendered by sunk from the Kubernetes node labels (Slurm 25.05 and later).\n---\n")
	for _, t := range topos {
		switch {
		case t.Topology == nil || t.Name == "":
			return "", fmt.Errorf("topology.yaml: a topology without a name or a rendering")
		case !topologyName.MatchString(t.Name):
			return "", fmt.Errorf("topology.yaml: topology name %q is not letters, digits, '_', '-' and '.'", t.Name)
		case seen[t.Name]:
			return "", fmt.Errorf("topology.yaml: topology %q twice", t.Name)
		}
		seen[t.Name] = true
		if t.Default {
			defaults++
		}
		fmt.Fprintf(&b, "- topology: %s\n  cluster_default: %t\n", strconv.Quote(t.Name), t.Default)
		// topology.conf's header (its kind and label keys): the operator writes a change of
		// either at once, and debounces one of nodes only (TopologyHeaders).
		if h, _, _ := strings.Cut(t.Conf, "\n"); strings.HasPrefix(h, topologyHeaderPrefix) {
			fmt.Fprintf(&b, "  %s\n", h)
		}
		for _, p := range t.Problems {
			fmt.Fprintf(&b, "  # %s\n", strings.ReplaceAll(p, "\n", " "))
		}
		switch {
		case len(t.Switches) > 0:
			b.WriteString("  tree:\n    switches:\n")
			for _, u := range t.Switches {
				fmt.Fprintf(&b, "      - switch: %s\n", strconv.Quote(u.Name))
				switch {
				case u.Children != "":
					fmt.Fprintf(&b, "        children: %s\n", strconv.Quote(u.Children))
				case u.Nodes != "": // a leaf kept without nodes (KeepPlaces) has no list
					fmt.Fprintf(&b, "        nodes: %s\n", strconv.Quote(u.Nodes))
				}
			}
		case len(t.Blocks) > 0:
			b.WriteString("  block:\n    block_sizes:\n")
			for _, s := range t.BlockSizes {
				fmt.Fprintf(&b, "      - %d\n", s)
			}
			b.WriteString("    blocks:\n")
			for _, u := range t.Blocks {
				fmt.Fprintf(&b, "      - block: %s\n", strconv.Quote(u.Name))
				if u.Nodes != "" {
					fmt.Fprintf(&b, "        nodes: %s\n", strconv.Quote(u.Nodes))
				}
			}
		default:
			b.WriteString("  # No nodes yet.\n  flat: true\n")
		}
	}
	if defaults != 1 {
		return "", fmt.Errorf("topology.yaml: %d cluster default topologies, want one", defaults)
	}
	return b.String(), nil
}

// TopologyHeaders are the headers of the topologies of a rendered topology.conf or
// topology.yaml: each names its kind and label keys. Two files with the same headers differ
// in their nodes only.
func TopologyHeaders(file string) string {
	var hs []string
	for _, l := range strings.Split(file, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, topologyHeaderPrefix) {
			hs = append(hs, l)
		}
	}
	return strings.Join(hs, "\n")
}
