//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// BenchmarkAutoscale measures an autoscaled NodeSet (maxReplicas 4, idleAfter 20 s) on real
// Slurm 26.05 and the local kubelet, by hand, not in `make test`:
//
//	go test -tags e2e -run '^$' -bench '^BenchmarkAutoscale$' -benchtime 1x -timeout 60m ./test/e2e/
//
// For a 1-node and a 4-node job, SUNK_BENCH_SAMPLES times each (default 5): submitted to the
// NodeSet at zero, pending → running (the cold start: pods created, slurmd registered, Slurm
// schedules); then at once the same job again on the nodes still up (the peer: Slurm's own
// pending → running, in the same run); then idle → parked (the job's end to every node parked
// and its pod gone). Then SUNK_BENCH_STEADY (default 5m) of a steady mixed load — a job of 1 to
// 4 nodes and 10 to 40 s every 15 s — and the autoscaler's decisions in it, per hour: a rule
// that flaps shows as many more decisions than jobs.
//
// Latencies are read inside the login pod (submission and running time stamps of a loop that
// asks squeue every 0.2 s), so kubectl exec's own time is not in them.
func BenchmarkAutoscale(b *testing.B) {
	samples := envInt(b, "SUNK_BENCH_SAMPLES", 5)
	steady := 5 * time.Minute
	if v := os.Getenv("SUNK_BENCH_STEADY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("SUNK_BENCH_STEADY: %v", err)
		}
		steady = d
	}
	const idleAfter = 20 * time.Second
	e := startOperator(b)
	e.createReady(b, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bench"},
		Spec:       sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever},
	})
	login := e.podOf(b, "bench", wellknown.ComponentLogin).Name
	e.createReplicasWith(b, "bench", "auto", 0, func(s *sunkv1.NodeSetSpec) {
		s.Replicas = nil
		s.Autoscaling = &sunkv1.NodeSetAutoscaling{MaxReplicas: 4, IdleAfter: &metav1.Duration{Duration: idleAfter}}
	})
	parked := func() {
		b.Helper()
		wait.For(b, "every node of NodeSet auto parked", 4*time.Minute, 250*time.Millisecond, func() error {
			ns := e.nodeSet(b, "auto")
			if pods := len(e.memberPods(b, "auto")); ns.Status.Parked != 4 || pods != 0 {
				return fmt.Errorf("%d parked, %d pods", ns.Status.Parked, pods)
			}
			return nil
		})
	}
	parked()
	b.ResetTimer()

	for _, n := range []int{1, 4} {
		var cold, warm, gone []float64
		for range samples {
			id, s := e.timedStart(b, login, fmt.Sprintf("-N%d --exclusive -J cold", n))
			cold = append(cold, s)
			e.release(b, login, id)
			e.jobEnd(b, login, id, 2*time.Minute)
			id, s = e.timedStart(b, login, fmt.Sprintf("-N%d --exclusive -J warm", n))
			warm = append(warm, s)
			e.release(b, login, id)
			_, _, end := e.jobEnd(b, login, id, 2*time.Minute)
			parked()
			gone = append(gone, time.Since(end).Seconds())
		}
		b.Logf("bench: name=autoscale-%dnode samples=%d from_zero_p50_s=%.1f from_zero_p99_s=%.1f warm_p50_s=%.1f warm_p99_s=%.1f idle_to_parked_p50_s=%.1f idle_to_parked_p99_s=%.1f idle_after_s=%.0f",
			n, samples, quantile(cold, 0.5), quantile(cold, 0.99), quantile(warm, 0.5), quantile(warm, 0.99),
			quantile(gone, 0.5), quantile(gone, 0.99), idleAfter.Seconds())
	}

	decisions := func() float64 {
		return testenv.SumMetric(e.metrics, "sunk_nodeset_autoscaler_decisions_total", "nodeset", "auto")
	}
	before, start := decisions(), time.Now()
	jobs := 0
	for time.Since(start) < steady {
		nodes, secs := 1+rand.IntN(4), 10+rand.IntN(31)
		e.mustSh(b, login, "login", fmt.Sprintf(testenv.AsUser("sbatch --parsable -N%d --exclusive -J steady --wrap 'sleep %d'"), nodes, secs))
		jobs++
		time.Sleep(15 * time.Second) // the load's own pace, not a wait for anything
	}
	hours := time.Since(start).Hours()
	b.Logf("bench: name=autoscale-steady minutes=%.1f jobs_per_hour=%.0f decisions_per_hour=%.0f",
		time.Since(start).Minutes(), float64(jobs)/hours, (decisions()-before)/hours)
}

// timedStart submits a held job (heldScript) and returns its id and how long it pended, read
// inside the login pod.
func (e *operatorEnv) timedStart(t testing.TB, login, args string) (string, float64) {
	t.Helper()
	script := fmt.Sprintf(`t0=$(date +%%s.%%N); id=$(`+testenv.AsUser(`sbatch --parsable %s --wrap '%s'`)+`) || exit 1
until [ "$(squeue -h -j $id -o %%T)" = RUNNING ]; do sleep 0.2; done; echo $id $t0 $(date +%%s.%%N)`, args, heldScript)
	out := e.mustSh(t, login, "login", script)
	f := strings.Fields(out)
	if len(f) != 3 {
		t.Fatalf("timed start %s: %q", args, out)
	}
	t0, err0 := strconv.ParseFloat(f[1], 64)
	t1, err1 := strconv.ParseFloat(f[2], 64)
	if err0 != nil || err1 != nil {
		t.Fatalf("timed start %s: %q", args, out)
	}
	return f[0], t1 - t0
}

// quantile is the nearest-rank quantile of xs (p99 of a few samples is their largest).
func quantile(xs []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
