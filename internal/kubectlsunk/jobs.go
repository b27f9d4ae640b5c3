package kubectlsunk

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"sunk.dev/sunk/pkg/wellknown"
)

// JobRow is one running Slurm job of a cluster: the Slurm nodes it runs on (from the job
// mirror the syncer keeps on compute pods), their compute pods and Kubernetes nodes, and the
// pods sunk-scheduler bound to it.
type JobRow struct {
	JobID       string   `json:"jobId"`
	Namespace   string   `json:"namespace"` // the cluster's ("" for a bound pod no compute pod runs the job of)
	Cluster     string   `json:"cluster"`
	SlurmNodes  []string `json:"slurmNodes"`
	ComputePods []string `json:"computePods"`
	Nodes       []string `json:"nodes"`
	// Pods are the pods sunk-scheduler bound to the job (sunk.dev/slurm-job), as namespace/name.
	Pods []string `json:"pods"`
}

// JobRows joins the job mirror of compute pods with the pods bound to Slurm jobs. A bound pod
// belongs to the job of its id that runs on a compute pod of its Kubernetes node (job ids are
// per cluster, and the scheduler's job runs on the Slurm node of the pod's node); a bound pod
// without one gets a row of its own, with no cluster.
func JobRows(compute, bound []corev1.Pod) []JobRow {
	type key struct{ ns, cluster, job string }
	rows := map[key]*JobRow{}
	onNode := map[[2]string][]key{} // (Kubernetes node, job id) -> rows
	for i := range compute {
		p := &compute[i]
		if p.Labels[wellknown.LabelComponent] != wellknown.ComponentCompute {
			continue
		}
		for _, id := range splitJobs(p.Annotations[wellknown.AnnotationSlurmJobs]) {
			k := key{p.Namespace, p.Labels[wellknown.LabelCluster], id}
			r := rows[k]
			if r == nil {
				r = &JobRow{JobID: id, Namespace: k.ns, Cluster: k.cluster}
				rows[k] = r
			}
			r.SlurmNodes = append(r.SlurmNodes, wellknown.SlurmNodeOf(p.Labels, p.Name))
			r.ComputePods = append(r.ComputePods, p.Name)
			if p.Spec.NodeName != "" {
				r.Nodes = append(r.Nodes, p.Spec.NodeName)
				onNode[[2]string{p.Spec.NodeName, id}] = append(onNode[[2]string{p.Spec.NodeName, id}], k)
			}
		}
	}
	for i := range bound {
		p := &bound[i]
		id := p.Annotations[wellknown.AnnotationJob]
		if id == "" || p.Labels[wellknown.LabelComponent] == wellknown.ComponentCompute {
			continue
		}
		ks := onNode[[2]string{p.Spec.NodeName, id}]
		if len(ks) == 0 {
			k := key{"", "", id}
			if rows[k] == nil {
				rows[k] = &JobRow{JobID: id}
			}
			if p.Spec.NodeName != "" {
				rows[k].Nodes = append(rows[k].Nodes, p.Spec.NodeName)
			}
			ks = []key{k}
		}
		for _, k := range ks {
			rows[k].Pods = append(rows[k].Pods, p.Namespace+"/"+p.Name)
		}
	}
	out := make([]JobRow, 0, len(rows))
	for _, r := range rows {
		for _, s := range []*[]string{&r.SlurmNodes, &r.ComputePods, &r.Nodes, &r.Pods} {
			slices.Sort(*s)
			*s = nonNil(slices.Compact(*s))
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b JobRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Cluster, b.Cluster), compareJobIDs(a.JobID, b.JobID))
	})
	return out
}

// InScope drops the rows of bound pods that no compute pod's job matched (no cluster) when they
// are outside what was asked: with a cluster named, all of them; with a namespace, those of
// other namespaces.
func InScope(rows []JobRow, namespace, cluster string) []JobRow {
	return slices.DeleteFunc(rows, func(r JobRow) bool {
		if r.Cluster != "" {
			return false
		}
		if cluster != "" {
			return true
		}
		return namespace != "" && !slices.ContainsFunc(r.Pods, func(p string) bool { return strings.HasPrefix(p, namespace+"/") })
	})
}

// splitJobs reads the job mirror annotation (ids, comma-separated).
func splitJobs(s string) []string {
	var ids []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// compareJobIDs orders numeric ids as numbers, anything else after them as text.
func compareJobIDs(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	rank := func(err error) int {
		if err != nil {
			return 1
		}
		return 0
	}
	return cmp.Or(cmp.Compare(rank(errA), rank(errB)), cmp.Compare(a, b))
}

// PrintJobs writes rows as a table (wide adds the namespace and compute pods) or as JSON.
func PrintJobs(w io.Writer, rows []JobRow, format string) error {
	if format == FormatJSON {
		return writeJSON(w, map[string]any{"kind": "SlurmJobList", "items": nonNil(rows)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if format == FormatWide {
		fmt.Fprintln(tw, "NAMESPACE\tCLUSTER\tJOB\tSLURM NODES\tCOMPUTE PODS\tNODES\tPODS")
	} else {
		fmt.Fprintln(tw, "CLUSTER\tJOB\tSLURM NODES\tNODES\tPODS")
	}
	list := func(s []string) string { return cmp.Or(strings.Join(s, ","), "-") }
	for _, r := range rows {
		if format == FormatWide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cmp.Or(r.Namespace, "-"), cmp.Or(r.Cluster, "-"), r.JobID,
				list(r.SlurmNodes), list(r.ComputePods), list(r.Nodes), list(r.Pods))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cmp.Or(r.Cluster, "-"), r.JobID, list(r.SlurmNodes), list(r.Nodes), list(r.Pods))
		}
	}
	return tw.Flush()
}
