//go:build integration

package integration

import (
	"fmt"
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
