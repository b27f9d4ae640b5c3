package kubectlsunk

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"sunk.dev/sunk/pkg/wellknown"
)

// SharedLoginPool is the pool column of the shared login pods (spec.login), which every user
// of the cluster may log in to.
const SharedLoginPool = "<shared>"

// LoginRow is one login pod: its pool (a Group pool's takes its group's members), and its user
// for a PerUser pool's.
type LoginRow struct {
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	Pool      string `json:"pool"`
	// User is the directory user a per-user pod runs as; empty for a shared pod.
	User  string `json:"user,omitempty"`
	Pod   string `json:"pod"`
	Node  string `json:"node"`
	Phase string `json:"phase"`
	Ready bool   `json:"ready"`
}

// LoginRows turns login pods into rows, sorted by namespace, cluster, pool and pod. Pods that
// are not login pods are left out.
func LoginRows(pods []corev1.Pod) []LoginRow {
	var rows []LoginRow
	for i := range pods {
		p := &pods[i]
		r := LoginRow{Namespace: p.Namespace, Cluster: p.Labels[wellknown.LabelCluster], Pod: p.Name,
			Node: p.Spec.NodeName, Phase: string(p.Status.Phase)}
		switch p.Labels[wellknown.LabelComponent] {
		case wellknown.ComponentLogin:
			r.Pool = SharedLoginPool
		case wellknown.ComponentLoginUser:
			r.Pool, r.User = p.Labels[wellknown.LabelLoginPool], p.Annotations[wellknown.AnnotationLoginUser]
		case wellknown.ComponentLoginGroup:
			r.Pool = p.Labels[wellknown.LabelLoginPool]
		default:
			continue
		}
		if p.DeletionTimestamp != nil {
			r.Phase = "Terminating"
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				r.Ready = c.Status == corev1.ConditionTrue
			}
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b LoginRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Pod, b.Pod))
	})
	return rows
}

// PrintLogins writes rows as a table (wide adds the namespace and phase) or as JSON.
func PrintLogins(w io.Writer, rows []LoginRow, format string) error {
	if format == FormatJSON {
		return writeJSON(w, map[string]any{"kind": "LoginPodList", "items": nonNil(rows)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if format == FormatWide {
		fmt.Fprintln(tw, "NAMESPACE\tCLUSTER\tPOOL\tUSER\tPOD\tREADY\tPHASE\tNODE")
	} else {
		fmt.Fprintln(tw, "CLUSTER\tPOOL\tUSER\tPOD\tREADY\tNODE")
	}
	for _, r := range rows {
		user, node := cmp.Or(r.User, "*"), cmp.Or(r.Node, "<none>")
		if format == FormatWide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\t%s\n", r.Namespace, r.Cluster, r.Pool, user, r.Pod, r.Ready, r.Phase, node)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\n", r.Cluster, r.Pool, user, r.Pod, r.Ready, node)
		}
	}
	return tw.Flush()
}
