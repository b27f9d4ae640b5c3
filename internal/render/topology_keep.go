package render

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/pkg/slurm"
)

// A dynamic node placed by topology_str keeps that place in slurmctld's state, and slurmctld
// applies it over topology.yaml at every reconfigure and restart (node_mgr.c, "Preserve
// dynamic topology"); a string naming a block, or a top switch, that the file lacks fails the
// reconfigure and ends slurmctld (read_config.c, _set_nodes_topo). So the file must keep
// every place a node's string names until the node has moved on: KeepPlaces adds such a place
// back, without nodes, and ReadTopologyYAML reads which places the file slurmctld runs has.

// FileTopology is what a topology.yaml sunk rendered says about its default topology.
type FileTopology struct {
	// Name is the topology's name, the first part of every topology_str placing a node in it.
	Name string
	// Places are each listed node's place (as in Topology.Places).
	Places map[string][]string
	// Units are every place the file has, with nodes or without: each leaf switch's path
	// from its top switch, or each block, joined by PlaceKey.
	Units map[string]bool
}

// PlaceKey is a place as one string: the unit part of a topology_str.
func PlaceKey(place []string) string { return strings.Join(place, ":") }

type yamlTopology struct {
	Topology       string `json:"topology"`
	ClusterDefault bool   `json:"cluster_default"`
	Tree           *struct {
		Switches []struct {
			Switch   string `json:"switch"`
			Nodes    string `json:"nodes"`
			Children string `json:"children"`
		} `json:"switches"`
	} `json:"tree"`
	Block *struct {
		Blocks []struct {
			Block string `json:"block"`
			Nodes string `json:"nodes"`
		} `json:"blocks"`
	} `json:"block"`
}

// ReadTopologyYAML reads the default topology of a topology.yaml RenderTopologyYAML wrote.
func ReadTopologyYAML(file string) (*FileTopology, error) {
	var topos []yamlTopology
	if err := yaml.Unmarshal([]byte(file), &topos); err != nil {
		return nil, fmt.Errorf("topology.yaml: %w", err)
	}
	for _, t := range topos {
		if !t.ClusterDefault {
			continue
		}
		ft := &FileTopology{Name: t.Topology, Places: map[string][]string{}, Units: map[string]bool{}}
		add := func(place []string, nodes string) error {
			ft.Units[PlaceKey(place)] = true
			if nodes == "" {
				return nil
			}
			names, err := slurm.ExpandHostlist(nodes)
			if err != nil {
				return fmt.Errorf("topology.yaml: unit %s: %w", PlaceKey(place), err)
			}
			for _, n := range names {
				ft.Places[n] = place
			}
			return nil
		}
		switch {
		case t.Tree != nil:
			parent := map[string]string{}
			for _, sw := range t.Tree.Switches {
				for _, c := range strings.Split(sw.Children, ",") {
					if c != "" {
						parent[c] = sw.Switch
					}
				}
			}
			for _, sw := range t.Tree.Switches {
				if sw.Children != "" {
					continue
				}
				path := []string{sw.Switch}
				for p, ok := parent[sw.Switch]; ok; p, ok = parent[p] {
					if len(path) > len(t.Tree.Switches) {
						return nil, fmt.Errorf("topology.yaml: switch %s is its own ancestor", sw.Switch)
					}
					path = append([]string{p}, path...)
				}
				if err := add(path, sw.Nodes); err != nil {
					return nil, err
				}
			}
		case t.Block != nil:
			for _, b := range t.Block.Blocks {
				if err := add([]string{b.Block}, b.Nodes); err != nil {
					return nil, err
				}
			}
		}
		return ft, nil
	}
	return nil, fmt.Errorf("topology.yaml: no cluster default topology")
}

// HasPlace says whether t has place: its block, or its leaf switch and every switch above it.
func (t *Topology) HasPlace(place []string) bool {
	if len(place) == 0 {
		return false
	}
	if t.Plugin == "topology/block" {
		return len(place) == 1 && unitIndex(t.Blocks, place[0]) >= 0
	}
	for i, name := range place {
		u := unitIndex(t.Switches, name)
		if u < 0 || (i == len(place)-1) != (t.Switches[u].Children == "") {
			return false
		}
	}
	return true
}

// KeepPlaces adds to t each place it lacks, as a leaf switch (and the switches above it) or
// a block without nodes, so that topology.yaml keeps it: why says which node's topology_str
// names it, for the comment in the file. A place that would turn a switch of t into another
// kind (a leaf into a parent, or back) is an error: the file must not change then.
func (t *Topology) KeepPlaces(places [][]string, why []string) error {
	for i, place := range places {
		if len(place) == 0 || t.HasPlace(place) {
			continue
		}
		if t.Plugin == "topology/block" {
			if len(place) != 1 || len(t.BlockSizes) == 0 {
				return fmt.Errorf("topology: cannot keep block %q beside %d blocks", PlaceKey(place), len(t.Blocks))
			}
			t.Blocks = append(t.Blocks, TopologyUnit{Name: place[0]})
		} else if err := t.keepSwitches(place); err != nil {
			return err
		}
		t.Problems = append(t.Problems, fmt.Sprintf("%s kept without nodes: %s", PlaceKey(place), why[i]))
	}
	return nil
}

func (t *Topology) keepSwitches(place []string) error {
	for i, name := range place {
		leaf := i == len(place)-1
		u := unitIndex(t.Switches, name)
		switch {
		case u < 0 && leaf:
			t.Switches = append(t.Switches, TopologyUnit{Name: name})
		case u < 0:
			t.Switches = append(t.Switches, TopologyUnit{Name: name, Children: place[i+1]})
		case leaf != (t.Switches[u].Children == ""):
			return fmt.Errorf("topology: cannot keep %s: switch %s is of another level now", PlaceKey(place), name)
		case !leaf:
			children := strings.Split(t.Switches[u].Children, ",")
			if !slices.Contains(children, place[i+1]) {
				children = append(children, place[i+1])
				sort.Strings(children)
				t.Switches[u].Children = strings.Join(children, ",")
			}
		}
	}
	return nil
}

func unitIndex(units []TopologyUnit, name string) int {
	for i, u := range units {
		if u.Name == name {
			return i
		}
	}
	return -1
}
