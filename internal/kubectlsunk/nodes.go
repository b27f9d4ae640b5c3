// Package kubectlsunk is the `kubectl sunk` plugin: one view of a Slurm node as both worlds see
// it (its compute pod, Kubernetes node and the Slurm state the syncer mirrors), the syncer's
// drain and resume protocol as commands, and the health of every SlurmCluster. It reads only
// Kubernetes objects: the syncer keeps Slurm's view on them, so the plugin needs no Slurm
// credentials and no route to slurmrestd.
package kubectlsunk

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"sunk.dev/sunk/pkg/wellknown"
)

// NodeRow is one Slurm node: its compute pod and what the syncer mirrored from Slurm.
type NodeRow struct {
	SlurmNode string `json:"slurmNode"`
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	NodeSet   string `json:"nodeSet"`
	Pod       string `json:"pod"`
	PodPhase  string `json:"podPhase"`
	Node      string `json:"node"`
	// SlurmState and SlurmReason are the syncer's mirror ("" before its first sync).
	SlurmState  string `json:"slurmState"`
	SlurmReason string `json:"slurmReason,omitempty"`
	// Available is the pod condition sunk.dev/SlurmNodeAvailable ("Unknown" without one).
	Available string `json:"available"`
}

// NodeRows turns compute pods into rows, sorted by namespace, cluster and Slurm node. Pods that
// are not compute pods are left out.
func NodeRows(pods []corev1.Pod) []NodeRow {
	var rows []NodeRow
	for i := range pods {
		p := &pods[i]
		if p.Labels[wellknown.LabelComponent] != wellknown.ComponentCompute {
			continue
		}
		r := NodeRow{
			SlurmNode: wellknown.SlurmNodeOf(p.Labels, p.Name), Namespace: p.Namespace,
			Cluster: p.Labels[wellknown.LabelCluster], NodeSet: p.Labels[wellknown.LabelNodeSet],
			Pod: p.Name, PodPhase: string(p.Status.Phase), Node: p.Spec.NodeName,
			SlurmState: p.Annotations[wellknown.AnnotationSlurmState], SlurmReason: p.Annotations[wellknown.AnnotationSlurmReason],
			Available: "Unknown",
		}
		if p.DeletionTimestamp != nil {
			r.PodPhase = "Terminating"
		}
		for _, c := range p.Status.Conditions {
			if string(c.Type) == wellknown.ConditionSlurmNode {
				r.Available = string(c.Status)
			}
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b NodeRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.SlurmNode, b.SlurmNode))
	})
	return rows
}

// Output formats, as kubectl names them.
const (
	FormatTable = ""
	FormatWide  = "wide"
	FormatJSON  = "json"
)

// CheckFormat names a format PrintNodes and PrintHealth do not know.
func CheckFormat(format string) error {
	switch format {
	case FormatTable, FormatWide, FormatJSON:
		return nil
	}
	return fmt.Errorf("--output %q: unknown format (want wide or json)", format)
}

// PrintNodes writes rows as a table (wide adds the namespace, pod phase and availability) or
// as JSON.
func PrintNodes(w io.Writer, rows []NodeRow, format string) error {
	if format == FormatJSON {
		return writeJSON(w, map[string]any{"kind": "SlurmNodeList", "items": nonNil(rows)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if format == FormatWide {
		fmt.Fprintln(tw, "NAMESPACE\tCLUSTER\tSLURM NODE\tSTATE\tREASON\tNODESET\tPOD\tPHASE\tNODE\tAVAILABLE")
	} else {
		fmt.Fprintln(tw, "CLUSTER\tSLURM NODE\tSTATE\tREASON\tPOD\tNODE")
	}
	for _, r := range rows {
		state, reason := cmp.Or(r.SlurmState, "<unsynced>"), cmp.Or(r.SlurmReason, "-")
		if format == FormatWide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Cluster, r.SlurmNode, state, reason,
				cmp.Or(r.NodeSet, "-"), r.Pod, r.PodPhase, cmp.Or(r.Node, "<none>"), r.Available)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Cluster, r.SlurmNode, state, reason, r.Pod, cmp.Or(r.Node, "<none>"))
		}
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
