// Package nodewatch serves Slurm's node table as changes: the node watcher beside slurmctld
// (cmd/sunk-nodewatch) and its client, the syncer's node source (docs/syncer.md, "The node
// watcher"). The watcher reads the table through sunk-slurm-nodes (images/slurm/nodewatch), a
// small C program on Slurm's own library, keeps it with a sequence number, and answers
// "changes since N" with only what changed, waiting for one when there is none (long poll).
package nodewatch

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// line is one line of sunk-slurm-nodes' output: exactly one field is set.
type line struct {
	Node  *wireNode `json:"node"`
	Gone  *string   `json:"gone"`
	Sync  *syncLine `json:"sync"`
	Error *string   `json:"error"`
}

type syncLine struct {
	Full       bool  `json:"full"`
	LastUpdate int64 `json:"last_update"`
	Nodes      int   `json:"nodes"`
	Changed    int   `json:"changed"`
}

// wireNode is a node as sunk-slurm-nodes prints it (node_info_t's fields, named as slurmrestd
// names them where it has them).
type wireNode struct {
	Name            string   `json:"name"`
	Hostname        string   `json:"hostname"`
	Address         string   `json:"address"`
	State           []string `json:"state"`
	Reason          string   `json:"reason"`
	ReasonSetBy     string   `json:"reason_set_by"`
	ReasonTime      int64    `json:"reason_time"`
	Comment         string   `json:"comment"`
	Extra           string   `json:"extra"`
	Features        string   `json:"features"`
	ActiveFeatures  string   `json:"features_act"`
	Partitions      string   `json:"partitions"`
	Gres            string   `json:"gres"`
	GresUsed        string   `json:"gres_used"`
	CPUs            int      `json:"cpus"`
	AllocCPUs       int      `json:"alloc_cpus"`
	RealMemory      int64    `json:"real_memory"`
	AllocMemory     int64    `json:"alloc_memory"`
	Weight          uint32   `json:"weight"`
	Version         string   `json:"version"`
	BootTime        int64    `json:"boot_time"`
	SlurmdStartTime int64    `json:"slurmd_start_time"`
	LastBusy        int64    `json:"last_busy"`
	Topology        string   `json:"topology"` // Slurm 25.05 on
}

func parseLine(b []byte) (line, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("sunk-slurm-nodes printed %.80q: %w", b, err)
	}
	n := 0
	for _, set := range []bool{l.Node != nil, l.Gone != nil, l.Sync != nil, l.Error != nil} {
		if set {
			n++
		}
	}
	if n != 1 || (l.Node != nil && l.Node.Name == "") {
		return l, fmt.Errorf("sunk-slurm-nodes printed %.80q: want one of node (with a name), gone, sync, error", b)
	}
	return l, nil
}

// flagOrder is the order slurmrestd lists a node's state flags in (the data parser's
// NODE_STATES, the same in v0.0.41 to v0.0.44): libslurm names them in another order, and the
// node's state annotation in Kubernetes must not change with the path it was read by.
var flagOrder = []string{"RESERVED", "UNDRAIN", "CLOUD", "RESUME", "DRAIN", "COMPLETING",
	"NOT_RESPONDING", "POWERED_DOWN", "FAIL", "POWERING_UP", "MAINTENANCE", "REBOOT_REQUESTED",
	"REBOOT_CANCELED", "POWERING_DOWN", "DYNAMIC_FUTURE", "REBOOT_ISSUED", "PLANNED",
	"INVALID_REG", "POWER_DOWN", "POWER_UP", "POWER_DRAIN", "DYNAMIC_NORM", "BLOCKED"}

func flagRank(f string) int {
	if i := slices.Index(flagOrder, f); i >= 0 {
		return i
	}
	return len(flagOrder) // unknown to sunk: after the known ones, in libslurm's order
}

// toNode is w as pkg/slurm's adapters read the same node from slurmrestd.
func (w *wireNode) toNode() slurm.Node {
	state := slices.Clone(w.State)
	if len(state) > 1 {
		slices.SortStableFunc(state[1:], func(a, b string) int { return flagRank(a) - flagRank(b) })
	}
	n := slurm.Node{
		Name: w.Name, Hostname: w.Hostname, Address: w.Address, State: state,
		Reason: w.Reason, ReasonSetBy: w.ReasonSetBy, ReasonChangedAt: unix(w.ReasonTime),
		Comment: w.Comment, Extra: w.Extra,
		Features: list(w.Features), ActiveFeatures: list(w.ActiveFeatures), Partitions: list(w.Partitions),
		Gres: w.Gres, GresUsed: w.GresUsed, Topology: w.Topology, CPUs: w.CPUs, AllocCPUs: w.AllocCPUs,
		RealMemoryMB: w.RealMemory, AllocMemoryMB: w.AllocMemory, Weight: w.Weight, Version: w.Version,
		BootTime: unix(w.BootTime), SlurmdStartTime: unix(w.SlurmdStartTime), LastBusy: unix(w.LastBusy),
	}
	return n
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func unix(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0)
}
