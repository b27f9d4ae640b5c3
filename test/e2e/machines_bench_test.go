//go:build e2e

package e2e

import (
	"slices"
	"testing"

	"sunk.dev/sunk/internal/clusternames"
)

// BenchmarkMachineFailure measures a machine failing, by hand, not in `make test`:
//
//	go test -tags e2e -run '^$' -bench '^BenchmarkMachineFailure$' -benchtime 1x -timeout 60m ./test/e2e/
//
// On TestSeveralMachines' cluster (the three real nodes), SUNK_BENCH_SAMPLES times (default 5):
// sunk-node-3's power cut while a requeueable job runs there (failOneMachine), from the cut to
// the Node NotReady (kube-controller-manager's grace period, 40 s) and to its Slurm node drained
// with the syncer's NotReady reason; then it boots again and the requeued job completes.
func BenchmarkMachineFailure(b *testing.B) {
	samples := envInt(b, "SUNK_BENCH_SAMPLES", 5)
	e := startOperator(b)
	nodes := e.realNodes(b, 3)
	login, _ := e.machinesCluster(b, nodes, nodes)
	member := func(node string) string { return clusternames.PerNodeMemberName("m", node) }
	var notReady, drained []float64
	for range samples {
		nr, d := e.failOneMachine(b, login, nodes, member)
		notReady, drained = append(notReady, nr.Seconds()), append(drained, d.Seconds())
	}
	slices.Sort(notReady)
	slices.Sort(drained)
	b.Logf("bench: name=machine-failure samples=%d not_ready_p50_s=%.1f not_ready_max_s=%.1f slurm_drained_p50_s=%.1f slurm_drained_max_s=%.1f",
		samples, notReady[len(notReady)/2], notReady[len(notReady)-1], drained[len(drained)/2], drained[len(drained)-1])
}
