package kubectlsunk

import (
	"bytes"
	"flag"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/internal/golden"
	"sunk.dev/sunk/pkg/wellknown"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func withJobs(p corev1.Pod, jobs string) corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[wellknown.AnnotationSlurmJobs] = jobs
	return p
}

func boundPod(ns, name, node, job string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{wellknown.AnnotationJob: job}},
		Spec: corev1.PodSpec{NodeName: node}}
}

// TestJobsGolden: a job on two nodes, two jobs sharing a node, a job of another cluster with
// the same id, a pod bound to a job (joined by its node), and a bound pod whose job no compute
// pod mirrors (yet), in every format.
func TestJobsGolden(t *testing.T) {
	other := computePod("b-cpu-0", "", "k3", "ALLOCATED", "", corev1.ConditionTrue)
	other.Labels[wellknown.LabelCluster] = "batch"
	compute := []corev1.Pod{
		withJobs(computePod("demo-cpu-0", "", "k1", "ALLOCATED", "", corev1.ConditionTrue), "12"),
		withJobs(computePod("demo-cpu-1", "", "k2", "MIXED", "", corev1.ConditionTrue), "9,12"),
		computePod("demo-cpu-2", "", "k2", "IDLE", "", corev1.ConditionTrue),
		withJobs(other, "9"),
	}
	bound := []corev1.Pod{
		boundPod("team-a", "trainer-0", "k1", "12"),
		boundPod("team-a", "trainer-1", "k2", "12"),
		boundPod("team-b", "early", "k4", "31"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "plain"}, Spec: corev1.PodSpec{NodeName: "k1"}},
	}
	rows := JobRows(compute, append(bound, compute...))
	var b bytes.Buffer
	for _, f := range []string{FormatTable, FormatWide, FormatJSON} {
		b.WriteString("$ kubectl sunk jobs" + map[string]string{FormatTable: "", FormatWide: " -o wide", FormatJSON: " -o json"}[f] + "\n")
		if err := PrintJobs(&b, rows, f); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, "testdata/jobs.golden", b.String(), *update, "go test ./internal/kubectlsunk -update")

	for _, c := range []struct {
		ns, cluster string
		want        int
	}{{"", "", 4}, {"team-b", "", 4}, {"slurm", "", 3}, {"", "demo", 3}} {
		if got := InScope(slices.Clone(rows), c.ns, c.cluster); len(got) != c.want {
			t.Errorf("InScope(-n %q --cluster %q): %d rows, want %d", c.ns, c.cluster, len(got), c.want)
		}
	}
}
