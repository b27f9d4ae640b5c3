package kubectlsunk

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkViewsAtScale (issue 42): `kubectl sunk nodes` and `jobs` past the API read, at
// 5,000 compute pods running 10,000 jobs (two per node, each on two nodes) and 2,000 pods
// sunk-scheduler bound to them: the rows and the table, beside the peer kubectl pays for the
// same pods whatever the plugin does, encoding them as JSON (`kubectl get pods -o json`). The
// API's list is the same for both and not measured here. It prints
//
//	bench: name=kubectl-sunk-scale pods=5000 jobs=10000 nodes_ms= jobs_ms= peer_json_ms=
//
// Run: go test -run '^$' -bench ViewsAtScale -benchtime 5x ./internal/kubectlsunk/
func BenchmarkViewsAtScale(b *testing.B) {
	const nodes, bound = 5000, 2000
	compute := make([]corev1.Pod, nodes)
	for i := range compute {
		p := computePod(fmt.Sprintf("cpu-%04d", i), "", fmt.Sprintf("k%04d", i), "ALLOCATED", "", corev1.ConditionTrue)
		// Node i runs jobs i and i+1 (mod nodes), each job on two nodes; ids 1..5000 and a
		// second range so that there are 10,000 jobs.
		compute[i] = withJobs(p, fmt.Sprintf("%d,%d", 1+i, 1+nodes+(i+1)%nodes))
	}
	pods := make([]corev1.Pod, bound)
	for i := range pods {
		pods[i] = boundPod("ml", fmt.Sprintf("train-%04d", i), fmt.Sprintf("k%04d", i), fmt.Sprint(1+i))
	}
	var nodesT, jobsT, peerT time.Duration
	var rows, jobRows int
	for b.Loop() {
		t0 := time.Now()
		nr := NodeRows(compute)
		if err := PrintNodes(io.Discard, nr, FormatTable); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		jr := JobRows(compute, pods)
		if err := PrintJobs(io.Discard, jr, FormatTable); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := json.NewEncoder(io.Discard).Encode(corev1.PodList{Items: append(compute[:len(compute):len(compute)], pods...)}); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		nodesT, jobsT, peerT = nodesT+t1.Sub(t0), jobsT+t2.Sub(t1), peerT+t3.Sub(t2)
		rows, jobRows = len(nr), len(jr)
	}
	if rows != nodes || jobRows != 2*nodes {
		b.Fatalf("%d node rows and %d job rows, want %d and %d", rows, jobRows, nodes, 2*nodes)
	}
	n := float64(b.N)
	b.Logf("bench: name=kubectl-sunk-scale pods=%d jobs=%d nodes_ms=%.1f jobs_ms=%.1f peer_json_ms=%.1f",
		nodes, jobRows, ms(nodesT)/n, ms(jobsT)/n, ms(peerT)/n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
