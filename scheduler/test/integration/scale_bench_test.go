//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// BenchmarkSchedulerAtScale (issue 42) measures sunk-scheduler, with kube-scheduler's default
// profile in the same process as its peer, in a cluster of N Slurm nodes and J jobs: N more
// node records in the test bed's real Slurm (FUTURE, as the syncer's and the exporter's
// benchmarks make them: this machine cannot run thousands of slurmd) with a compute pod each
// (API objects on a Kubernetes node of their own name, no kubelet), and J held jobs. Then P pods
// of each scheduler are created one after another, each waited for until bound, and the process's
// heap is read after a collection: before the N nodes, J jobs and their pods exist (the
// scheduler idle on the bed's three nodes) and after. It prints one line:
//
//	bench: name=scheduler-scale nodes= jobs= pods= first_bind_ms= bind_p50_ms= bind_p99_ms=
//	       default_bind_p50_ms= default_bind_p99_ms= heap_idle_mb= heap_mb=
//
// first_bind_ms is the first pod's, created right after the J submissions (the job informer's
// catch-up); the percentiles are the P pods after it.
//
// heap is the whole test process's: both schedulers, their informers (kube-scheduler's of the
// N compute pods; the plugin's of N Slurm nodes and J jobs), and the test's clients. SUNK_BENCH_NODES
// (default 5000), SUNK_BENCH_JOBS (default 9000: the bed's MaxJobCount is 10,000 and ended jobs
// of earlier tests stay for MinJobAge) and SUNK_BENCH_PODS (default 40) set the sizes.
//
// Run: cd scheduler && go test -tags integration -run '^$' -bench SchedulerAtScale -benchtime 1x -timeout 30m ./test/integration/
func BenchmarkSchedulerAtScale(b *testing.B) {
	nodes := testenv.BenchInt(b, "SUNK_BENCH_NODES", 5000, 10, 50000)
	jobs := testenv.BenchInt(b, "SUNK_BENCH_JOBS", 9000, 10, 9500)
	pods := testenv.BenchInt(b, "SUNK_BENCH_PODS", 40, 1, 1000)
	e := setup(b)
	e.setTenants(testsTenant)
	e.startScheduler(defaultProfile)
	e.bindOneByOne("warm", 1, schedulerName) // the plugin has read Slurm once
	idle := testenv.HeapInUseMB()

	spec := fmt.Sprintf("nodename=sb[00000-%05d]", nodes-1)
	e.slurm.exec(b, "scontrol", "create", spec, "state=future", "cpus=1", "realmemory=100", "features=sunk-bench")
	b.Cleanup(func() { e.slurm.exec(b, "scontrol", "delete", spec) })
	testenv.Parallel(b, nodes, 8, func(i int) error {
		name := fmt.Sprintf("sb%05d", i)
		_, err := e.cs.CoreV1().Pods(computeNS).Create(e.ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: computeNS, Labels: map[string]string{
				wellknown.LabelCluster: clusterName, wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelSlurmNode: name}},
			Spec: v1.PodSpec{NodeName: "k8s-" + name, Hostname: name, Containers: []v1.Container{{Name: "slurmd", Image: "slurmd"}}},
		}, metav1.CreateOptions{})
		return err
	})
	const jobName = "sunk-bench-scheduler-scale"
	b.Cleanup(func() { e.slurm.exec(b, "scancel", "--name="+jobName) })
	testenv.SubmitHeldJobs(b, e.ctx, e.sc, jobName, jobs)

	// The first pod comes right after the burst of J submissions, while the plugin's job
	// informer still reads them (a full list of J jobs): its time is that catch-up, printed on
	// its own (first_bind_ms); the percentiles are the pods after it.
	sunk := e.bindOneByOne("scale", pods+1, schedulerName)
	def := e.bindOneByOne("scale-default", pods+1, "default-scheduler")
	fmt.Printf("bench: name=scheduler-scale nodes=%d jobs=%d pods=%d first_bind_ms=%d bind_p50_ms=%.0f bind_p99_ms=%.0f default_bind_p50_ms=%.0f default_bind_p99_ms=%.0f heap_idle_mb=%.1f heap_mb=%.1f\n",
		nodes, jobs, pods, sunk[0].Milliseconds(), testenv.PercentileMS(sunk[1:], 50), testenv.PercentileMS(sunk[1:], 99),
		testenv.PercentileMS(def[1:], 50), testenv.PercentileMS(def[1:], 99), idle, testenv.HeapInUseMB())
}

// bindOneByOne creates n pods for scheduler, one after another, each waited for until bound
// and then deleted (its placeholder job is cancelled), and returns their creation-to-bound times.
func (e *env) bindOneByOne(prefix string, n int, scheduler string) []time.Duration {
	e.t.Helper()
	var took []time.Duration
	for i := range n {
		name := prefix + "-" + strconv.Itoa(i)
		start := time.Now()
		e.createPod(name, func(p *v1.Pod) {
			p.Spec.SchedulerName = scheduler
			p.Annotations = map[string]string{wellknown.AnnotationPartition: "bench", wellknown.AnnotationExclusive: "false"}
		})
		e.waitBound(name, 2*time.Minute)
		took = append(took, time.Since(start))
		if err := e.cs.CoreV1().Pods(testNS).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			e.t.Fatal(err)
		}
	}
	return took
}
