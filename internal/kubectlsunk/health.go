package kubectlsunk

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// ClusterHealth is one SlurmCluster's conditions and its NodeSets' counts.
type ClusterHealth struct {
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Ready      string             `json:"ready"`
	Conditions []metav1.Condition `json:"conditions"`
	NodeSets   []NodeSetHealth    `json:"nodeSets"`
}

// NodeSetHealth counts a NodeSet's Slurm nodes.
type NodeSetHealth struct {
	Name    string `json:"name"`
	Desired int32  `json:"desired"`
	Ready   int32  `json:"ready"`
	Busy    int32  `json:"busy"`
	Drained int32  `json:"drained"`
}

// Health joins clusters with their NodeSets (by spec.clusterRef in the same namespace).
func Health(clusters []sunkv1.SlurmCluster, nodeSets []sunkv1.NodeSet) []ClusterHealth {
	var out []ClusterHealth
	for _, c := range clusters {
		h := ClusterHealth{Namespace: c.Namespace, Name: c.Name, Ready: "Unknown", Conditions: c.Status.Conditions}
		if r := meta.FindStatusCondition(c.Status.Conditions, sunkv1.ConditionReady); r != nil {
			h.Ready = string(r.Status)
		}
		for _, ns := range nodeSets {
			if ns.Namespace == c.Namespace && ns.Spec.ClusterRef == c.Name {
				h.NodeSets = append(h.NodeSets, NodeSetHealth{Name: ns.Name, Desired: ns.Status.Desired,
					Ready: ns.Status.Ready, Busy: ns.Status.Busy, Drained: ns.Status.Drained})
			}
		}
		slices.SortFunc(h.NodeSets, func(a, b NodeSetHealth) int { return cmp.Compare(a.Name, b.Name) })
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b ClusterHealth) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// PrintHealth writes one block per cluster: its Ready condition, every condition that is not
// True with its reason and message (all of them with wide; and Ready when its reason is not
// Ready, as while the backup slurmctld serves), and its NodeSets.
func PrintHealth(w io.Writer, hs []ClusterHealth, format string) error {
	if format == FormatJSON {
		return writeJSON(w, map[string]any{"kind": "SlurmClusterHealthList", "items": nonNil(hs)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for i, h := range hs {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "SlurmCluster %s/%s\tReady=%s\n", h.Namespace, h.Name, h.Ready)
		for _, c := range h.Conditions {
			// Ready True with a reason of its own (BackupInCharge) serves with a caveat.
			caveat := c.Type == sunkv1.ConditionReady && c.Reason != sunkv1.ReasonReady
			if c.Status == metav1.ConditionTrue && !caveat && format != FormatWide {
				continue
			}
			fmt.Fprintf(tw, "  %s=%s\t%s\t%s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
		}
		for _, n := range h.NodeSets {
			fmt.Fprintf(tw, "  NodeSet %s\tdesired %d, ready %d, busy %d, drained %d\n", n.Name, n.Desired, n.Ready, n.Busy, n.Drained)
		}
	}
	return tw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
