//go:build integration

package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/faultproxy"
)

// TestBurstThroughLostAnswers: a burst of pods meets a slurmrestd whose answers are lost (it
// carries out each submission, the scheduler sees a 502 and submits again). Once it heals, every
// pod is bound once, to the one live job left for it; the other jobs are cancelled; deleting
// the pods leaves no live job behind.
func TestBurstThroughLostAnswers(t *testing.T) {
	e := setup(t)
	proxy := faultproxy.New(t, e.slurm.RESTURL)
	e.slurmURL = proxy.URL
	e.startScheduler("")
	// The scheduler has read Slurm once (a pod bound) before the answers get lost.
	warm := e.createPod("warm", withAnnotations(wellknown.AnnotationPartition, "bench", wellknown.AnnotationExclusive, "false"))
	e.waitBound(warm.Name, 60*time.Second)
	const n = 30
	var pods []*v1.Pod
	proxy.Set(faultproxy.LoseAnswer)
	for i := range n {
		pods = append(pods, e.createPod(fmt.Sprintf("burst-%02d", i), small, withAnnotations(
			wellknown.AnnotationPartition, "bench", wellknown.AnnotationExclusive, "false")))
	}
	liveJobs := func(p *v1.Pod) []slurm.Job {
		var live []slurm.Job
		for _, j := range e.jobsNaming(string(p.UID)) {
			if b := j.BaseState(); b == "PENDING" || b == "RUNNING" {
				live = append(live, j)
			}
		}
		return live
	}
	// The outage lasts until at least one pod has two jobs: a lost answer was submitted again.
	e.eventually("a pod with two jobs from lost answers", 60*time.Second, func() (bool, string) {
		for _, p := range pods {
			if jobs := e.jobsNaming(string(p.UID)); len(jobs) >= 2 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d requests broken so far", proxy.Broken.Load())
	})
	proxy.Set(faultproxy.None)
	submitted := 0
	for _, p := range pods {
		submitted += len(e.jobsNaming(string(p.UID)))
	}
	for _, p := range pods {
		e.waitBound(p.Name, 120*time.Second)
	}
	e.eventually("one live job per pod, the one it is bound to", 60*time.Second, func() (bool, string) {
		for _, p := range pods {
			cur := e.getPod(p.Name)
			live := liveJobs(cur)
			if len(live) != 1 || strconv.FormatUint(uint64(live[0].ID), 10) != cur.Annotations[wellknown.AnnotationJob] {
				return false, fmt.Sprintf("pod %s bound with job %q has live jobs %v", p.Name, cur.Annotations[wellknown.AnnotationJob], ids(live))
			}
		}
		return true, ""
	})
	t.Logf("%d pods, %d jobs submitted through %d broken requests", n, submitted, proxy.Broken.Load())
	for _, p := range pods {
		if err := e.cs.CoreV1().Pods(testNS).Delete(e.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("no live job left once the pods are gone", 60*time.Second, func() (bool, string) {
		var left []string
		for _, p := range pods {
			for _, j := range liveJobs(p) {
				left = append(left, fmt.Sprint(j.ID))
			}
		}
		return len(left) == 0, "live: " + strings.Join(left, ",")
	})
}

// small asks for little enough that all the burst's pods fit on the test's nodes at once.
func small(p *v1.Pod) {
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("10Mi")}
}

func ids(jobs []slurm.Job) []uint32 {
	out := make([]uint32, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestBurstThroughRestdOutage: slurmrestd goes away (the test bed stops it: connection refused)
// while a burst of 200 pods arrives, and comes back. Afterwards every pod is bound, to the one
// live job that names it; no job names a pod that is gone or has another (the live placeholder
// jobs are as many as the pods); deleting the pods leaves no live job.
func TestBurstThroughRestdOutage(t *testing.T) {
	e := setup(t)
	e.startScheduler("")
	opts := []podOpt{small, withAnnotations(wellknown.AnnotationPartition, "bench", wellknown.AnnotationExclusive, "false")}
	warm := e.createPod("warm", opts...)
	e.waitBound(warm.Name, 60*time.Second)
	const n = 200
	down := false
	t.Cleanup(func() {
		if down {
			e.restd(t, "start-restd")
		}
	})
	names, allCreated := e.createPods(opts...)
	var stopped time.Time
	for i := range n {
		if i == n/4 {
			e.restd(t, "stop-restd")
			down = true
			stopped = time.Now()
		}
		names <- fmt.Sprintf("outage-%03d", i)
	}
	close(names)
	allCreated()
	// The outage lasts until the scheduler has failed to ask for a job as many times as there
	// are pods: the pods created during it, each tried again (2 s after a failure), met no
	// slurmrestd. A pod's job is asked for first as an allocation (POST /job/allocate).
	e.eventually("requests for jobs that found no slurmrestd", 60*time.Second, func() (bool, string) {
		got := counter(t, "sunk_slurm_rest_requests_total", map[string]string{"outcome": "unavailable", "endpoint": "POST /job/allocate"})
		return got >= n, fmt.Sprintf("%v submissions unavailable", got)
	})
	e.restd(t, "start-restd")
	down = false
	started := time.Now()
	unavailable := counter(t, "sunk_slurm_rest_requests_total", map[string]string{"outcome": "unavailable"})

	e.eventually("every pod bound", 180*time.Second, func() (bool, string) {
		var unbound []v1.Pod
		for _, p := range e.listPods("") {
			if p.Spec.NodeName == "" {
				unbound = append(unbound, p)
			}
		}
		if len(unbound) == 0 {
			return true, ""
		}
		// Why a pod waits (its condition, the jobs naming it) is what a failure needs.
		live := e.livePlaceholderJobs()
		var why []string
		for _, p := range unbound[:min(len(unbound), 3)] {
			why = append(why, fmt.Sprintf("%s (%s; live jobs %v)", p.Name, scheduledCondition(&p), live[string(p.UID)]))
		}
		return false, fmt.Sprintf("%d pods unbound, first: %s", len(unbound), strings.Join(why, "; "))
	})
	allBound := time.Since(started)
	e.eventually("one live job per pod, the one it is bound to, and no other", 60*time.Second, func() (bool, string) {
		live := e.livePlaceholderJobs()
		pods := e.listPods("")
		for _, p := range pods {
			jobs := live[string(p.UID)]
			if len(jobs) != 1 || strconv.FormatUint(uint64(jobs[0]), 10) != p.Annotations[wellknown.AnnotationJob] {
				return false, fmt.Sprintf("pod %s bound with job %q has live jobs %v", p.Name, p.Annotations[wellknown.AnnotationJob], jobs)
			}
		}
		if len(live) != len(pods) {
			return false, fmt.Sprintf("%d pods, live jobs for %d", len(pods), len(live))
		}
		return true, ""
	})
	t.Logf("%d pods through a slurmrestd outage of %.1f s: %v requests found it down; all bound %.1f s after it came back",
		n+1, started.Sub(stopped).Seconds(), unavailable, allBound.Seconds())
	if err := e.cs.CoreV1().Pods(testNS).DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("no live job left once the pods are gone", 90*time.Second, func() (bool, string) {
		live := e.livePlaceholderJobs()
		return len(live) == 0, fmt.Sprintf("live jobs for %d pods", len(live))
	})
}

// restd runs hack/env-slurm.sh stop-restd or start-restd. Only under /tmp/sunk-env.lock: the
// test bed is shared.
func (e *env) restd(t *testing.T, verb string) {
	t.Helper()
	if out, err := exec.Command(filepath.Join(repoRoot(), "hack", "env-slurm.sh"), verb).CombinedOutput(); err != nil {
		t.Fatalf("hack/env-slurm.sh %s: %v\n%s", verb, err, out)
	}
}

// livePlaceholderJobs are the live jobs (pending or running) of single pods, by the pod UID
// their comment names.
func (e *env) livePlaceholderJobs() map[string][]uint32 {
	e.t.Helper()
	l, err := e.sc.ListJobs(e.ctx, time.Time{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]uint32{}
	for _, j := range l.Jobs {
		body, _, _ := strings.Cut(j.Comment, ";")
		uid, ok := strings.CutPrefix(body, "sunk-pod:")
		if !ok || finished(&j) {
			continue
		}
		out[uid] = append(out[uid], j.ID)
	}
	return out
}
