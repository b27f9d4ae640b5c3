// The GRES rule of the decision core: Slurm's GRES for a node against those its pod
// registered (docs/syncer.md, "GRES mismatch").

package syncer

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"sunk.dev/sunk/pkg/slurm"
)

// Registered is the GRES a compute pod registered its Slurm node with: the Gres= of its
// node line (clusternames.RegisteredGres). Known is false for a pod without a node line sunk
// rendered: nothing to compare with.
type Registered struct {
	Gres  string
	Known bool
}

// GresCause compares the GRES Slurm reports for node n with those its pod registered and
// returns CauseGres with both when they differ, else "". Slurm rebuilds a node's GRES from
// what its slurmd found at registration (fewer devices, another type), and a record that
// outlived its pod keeps the GRES of the pod before: either way jobs would be given GPUs
// Kubernetes did not grant, or not be given those it did. Counts are compared by name and
// type; zero counts and the detail in parentheses (sockets, indexes) do not count. Nothing
// is decided on what cannot be read: a pod without a line, or a GRES string of either side
// that is not name[:type][:count] entries.
func GresCause(reg Registered, n *slurm.Node) string {
	if !reg.Known {
		return ""
	}
	want, err := slurm.ParseGres(reg.Gres)
	if err != nil {
		return ""
	}
	got, err := slurm.ParseGres(n.Gres)
	if err != nil {
		return ""
	}
	if gresString(want) == gresString(got) {
		return ""
	}
	return CauseGres + " (Slurm has " + gresString(got) + ", the pod registered " + gresString(want) + ")"
}

// gresString writes GRES counts in one order, without zero counts: "gpu:h100:8,nic:1", or
// "none".
func gresString(counts map[string]int64) string {
	var entries []string
	for k, n := range counts {
		if n != 0 {
			entries = append(entries, k+":"+strconv.FormatInt(n, 10))
		}
	}
	if len(entries) == 0 {
		return "none"
	}
	sort.Strings(entries)
	return strings.Join(entries, ",")
}

// WithGres is the causes of a node: its Kubernetes causes (Causes), then GresCause's when
// its GRES differ from what its pod registered.
func WithGres(causes []string, reg Registered, n *slurm.Node) []string {
	if c := GresCause(reg, n); c != "" {
		return append(slices.Clip(causes), c)
	}
	return causes
}
