//go:build integration

package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/scheduler/plugin"
)

var zero = int64(0)

func (e *env) deletePod(name string) {
	e.t.Helper()
	if err := e.cs.CoreV1().Pods(testNS).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) nodeTaint(node string) string {
	e.t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == wellknown.TaintJob {
			return t.Value + ":" + string(t.Effect)
		}
	}
	return ""
}

// sbatch submits a batch job that sleeps (named so that cleanup finds it) and returns its id.
func (e *env) sbatch(args ...string) uint32 {
	e.t.Helper()
	out := e.slurm.exec(e.t, append(append([]string{"sbatch", "-J", "sunk-sched-test", "-o", "/dev/null", "--parsable"}, args...), "--wrap", "sleep 600")...)
	var id uint32
	if _, err := fmt.Sscan(strings.Split(out, ";")[0], &id); err != nil {
		e.t.Fatalf("sbatch printed %q", out)
	}
	e.t.Cleanup(func() { _ = e.sc.CancelJob(e.ctx, id) })
	return id
}

// A pod is bound to the node that hosts the Slurm node Slurm ran its job on; Slurm chooses only
// among the nodes that pass Kubernetes' filters; the node is locked while the job runs; deleting
// the pod cancels the job and lifts the lock.
func TestBindsWhereSlurmRunsTheJob(t *testing.T) {
	e := setup(t)
	e.startScheduler(defaultProfile)
	avoid := e.slurm.Nodes[0]
	// With a node it may use idle, Slurm starts the pod's job at once: an allocation.
	e.eventually("an idle Slurm node the pod may use", 5*time.Minute, func() (bool, string) {
		var states []string
		for _, name := range e.slurm.Nodes[1:] {
			n, err := e.sc.GetNode(e.ctx, name)
			if err != nil {
				return false, err.Error()
			}
			if n.BaseState() == "IDLE" && !n.HasState("COMPLETING") && !n.HasState("DRAIN") {
				return true, ""
			}
			states = append(states, fmt.Sprintf("%s %v", name, n.State))
		}
		return false, strings.Join(states, ", ")
	})
	pod := e.createPod("p1", notOnNode(e.hostOf[avoid]),
		withAnnotations(wellknown.AnnotationTimeLimit, "30", wellknown.AnnotationPriority, "5000"))
	pod = e.waitBound("p1", 90*time.Second)
	j := e.jobOfPod(pod)
	if j.BaseState() != "RUNNING" || j.Comment != e.marked("sunk-pod:"+string(pod.UID)) {
		t.Fatalf("job %d: state %v comment %q, want RUNNING naming pod %s", j.ID, j.State, j.Comment, pod.UID)
	}
	if host := e.hostOf[j.Nodes]; host != pod.Spec.NodeName {
		t.Fatalf("job %d runs on Slurm node %q (hosted by %q) but the pod was bound to %q", j.ID, j.Nodes, host, pod.Spec.NodeName)
	}
	if j.Nodes == avoid || !strings.Contains(j.ExcludedNodes, avoid) {
		t.Fatalf("job %d on %q excludes %q; the pod's affinity rules out %s", j.ID, j.Nodes, j.ExcludedNodes, avoid)
	}
	if !j.Exclusive || j.TimeLimit != 30*time.Minute || j.Priority != 5000 || j.CPUs < 1 {
		t.Fatalf("job %d: exclusive %v time limit %v priority %d cpus %d", j.ID, j.Exclusive, j.TimeLimit, j.Priority, j.CPUs)
	}
	if got, want := e.nodeTaint(pod.Spec.NodeName), fmt.Sprintf("%d:NoSchedule", j.ID); got != want {
		t.Fatalf("node lock on %s = %q, want %q", pod.Spec.NodeName, got, want)
	}
	// Slurm started the job at once: the binding named it (jobOfPod read the annotation), and
	// no SlurmAllocated event repeats it (TestOneCyclePerWaitingPod has the event of a job that
	// waited).

	// The node lock keeps an ordinary pod (default scheduler) off the node while the job runs.
	e.createPod("ordinary", onNode(pod.Spec.NodeName), func(p *v1.Pod) { p.Spec.SchedulerName = "default-scheduler" })
	e.eventually("ordinary pod kept off the locked node", 30*time.Second, func() (bool, string) {
		c := scheduledCondition(e.getPod("ordinary"))
		return strings.Contains(c, "PodScheduled=False") && strings.Contains(c, wellknown.TaintJob), c
	})

	e.deletePod("p1")
	e.waitJobState(j.ID, 30*time.Second, "CANCELLED")
	e.eventually("node lock lifted", 30*time.Second, func() (bool, string) {
		got := e.nodeTaint(pod.Spec.NodeName)
		return got == "", got
	})
	if ordinary := e.waitBound("ordinary", 60*time.Second); ordinary.Spec.NodeName != pod.Spec.NodeName {
		t.Fatalf("ordinary pod bound to %s, want %s", ordinary.Spec.NodeName, pod.Spec.NodeName)
	}

	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				values[mf.GetName()] += m.Counter.GetValue()
			case m.Histogram != nil:
				values[mf.GetName()] += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	for _, name := range []string{"sunk_scheduler_jobs_submitted_total", "sunk_scheduler_jobs_cancelled_total", "sunk_scheduler_bind_latency_seconds"} {
		if values[name] < 1 {
			t.Errorf("metric %s = %v, want at least 1", name, values[name])
		}
	}
}

// A malformed annotation is named in the pod's condition and in an event; no job is made.
func TestBadAnnotationIsReported(t *testing.T) {
	e := setup(t)
	e.startScheduler("")
	pod := e.createPod("bad", withAnnotations(wellknown.AnnotationTimeLimit, "soon"))
	e.eventually("condition naming the annotation", 30*time.Second, func() (bool, string) {
		c := scheduledCondition(e.getPod("bad"))
		return strings.Contains(c, "PodScheduled=False") && strings.Contains(c, wellknown.AnnotationTimeLimit), c
	})
	e.waitEvent(pod, "InvalidAnnotation", wellknown.AnnotationTimeLimit, 10*time.Second)
	if jobs := e.jobsNaming(string(pod.UID)); len(jobs) != 0 {
		t.Fatalf("a pod with a bad annotation got jobs %v", jobs)
	}
}

// Slurm's pending reason shows on a waiting pod; a pod in the high-priority partition preempts
// Slurm batch work and runs; a placeholder job that Slurm preempts evicts its pod.
func TestPreemption(t *testing.T) {
	e := setup(t)
	e.startScheduler("")
	sn := e.slurm.Nodes[0]
	host := e.hostOf[sn]
	batch := e.sbatch("-p", "all", "-w", sn, "--exclusive")
	e.waitJobState(batch, 30*time.Second, "RUNNING")

	// Same tier as the batch job: waits, and says why.
	low := e.createPod("low", onNode(host), withAnnotations(wellknown.AnnotationPartition, "all"))
	e.eventually("pending reason on the pod", 60*time.Second, func() (bool, string) {
		c := scheduledCondition(e.getPod("low"))
		return strings.Contains(c, "is PENDING: Resources") || strings.Contains(c, "is PENDING: Priority"), c
	})
	e.waitEvent(low, "SlurmPending", "is PENDING", 10*time.Second)

	// Higher tier: preempts the batch job (PreemptMode=CANCEL) and is bound to its node.
	high := e.createPod("high", onNode(host), withAnnotations(wellknown.AnnotationPartition, "urgent"))
	high = e.waitBound("high", 90*time.Second)
	if high.Spec.NodeName != host {
		t.Fatalf("high bound to %s, want %s", high.Spec.NodeName, host)
	}
	if j := e.waitJobState(batch, 30*time.Second, "PREEMPTED"); j.BaseState() != "PREEMPTED" {
		t.Fatalf("batch job %d: %v", batch, j.State)
	}
	if p := e.getPod("low"); p.Spec.NodeName != "" {
		t.Fatalf("low was bound to %s while high holds the node", p.Spec.NodeName)
	}

	// high leaves; low gets the node; then urgent batch work preempts low's job.
	e.deletePod("high")
	low = e.waitBound("low", 90*time.Second)
	lowJob := e.jobOfPod(low)
	e.sbatch("-p", "urgent", "-w", sn, "--exclusive")
	e.waitJobState(lowJob.ID, 60*time.Second, "PREEMPTED")
	e.eventually("low evicted", 30*time.Second, func() (bool, string) {
		p, err := e.cs.CoreV1().Pods(testNS).Get(e.ctx, "low", metav1.GetOptions{})
		if err != nil {
			return strings.Contains(err.Error(), "not found"), err.Error()
		}
		return p.DeletionTimestamp != nil, "not deleting"
	})
	e.waitEvent(low, "SlurmPreempted", fmt.Sprintf("Slurm job %d ended: PREEMPTED", lowJob.ID), 10*time.Second)
	_ = e.cs.CoreV1().Pods(testNS).Delete(e.ctx, "low", metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// A pod that preempts a batch job of a partition with PreemptMode=REQUEUE (the test bed's
// "requeue") sends the job back to Slurm's queue instead of ending it: the seeds' inference pod
// taking a node from training that must not be lost. The job pends again, its restart count one,
// eligible to start again once Slurm's credential lifetime has passed (AuthInfo cred_expire,
// 120 s by default, src/slurmctld/job_mgr.c), and the pod's end leaves it queued. Running again
// is Slurm's own scheduling after that wait, not waited out here.
func TestPreemptionRequeues(t *testing.T) {
	e := setup(t)
	e.startScheduler("")
	sn := e.slurm.Nodes[0]
	host := e.hostOf[sn]
	batch := e.sbatch("-p", "requeue", "-w", sn, "--exclusive", "--requeue")
	e.waitJobState(batch, 30*time.Second, "RUNNING")

	start := time.Now()
	pod := e.createPod("inference", onNode(host), withAnnotations(wellknown.AnnotationPartition, "urgent"))
	pod = e.waitBound(pod.Name, 90*time.Second)
	bound := time.Since(start)
	if pod.Spec.NodeName != host {
		t.Fatalf("inference bound to %s, want %s", pod.Spec.NodeName, host)
	}
	var j *slurm.Job
	e.eventually("the batch job back in the queue", 60*time.Second, func() (bool, string) {
		j = e.job(batch)
		return j.BaseState() == "PENDING" && j.RestartCount == 1, fmt.Sprintf("%v %s, restarts %d", j.State, j.StateReason, j.RestartCount)
	})
	requeued := time.Since(start)
	if j.StateReason != "BeginTime" || !j.EligibleTime.After(time.Now()) {
		t.Fatalf("requeued job %d: reason %q, eligible at %v; want BeginTime, later than now", batch, j.StateReason, j.EligibleTime)
	}
	eligibleAfter := j.EligibleTime.Sub(start)

	podJob := e.jobOfPod(pod)
	e.deletePod(pod.Name)
	e.waitJobState(podJob.ID, 30*time.Second, "CANCELLED", "COMPLETED")
	if j = e.job(batch); j.BaseState() != "PENDING" || j.RestartCount != 1 {
		t.Fatalf("after the pod's end, job %d is %v (restarts %d); want PENDING, requeued once", batch, j.State, j.RestartCount)
	}
	fmt.Printf("bench: requeue_pod_bound_s=%.3f requeue_job_pending_s=%.3f requeue_eligible_after_s=%.1f\n",
		bound.Seconds(), requeued.Seconds(), eligibleAfter.Seconds())
}

// counter sums a counter of this process's kube-scheduler metrics over the series whose labels
// include want.
func counter(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A single pod whose job waits in Slurm costs one scheduling cycle, the one that binds it: its
// job is submitted from PreEnqueue, while the job pends the pod stays out of the queue (its
// condition still shows why), and no preemption runs on its behalf. It used to fail a cycle
// per change of its job, each running DefaultPreemption, and later one (the submitting cycle).
func TestOneCyclePerWaitingPod(t *testing.T) {
	e := setup(t)
	e.startScheduler("")
	sn := e.slurm.Nodes[0]
	host := e.hostOf[sn]
	batch := e.sbatch("-p", "all", "-w", sn, "--exclusive")
	e.waitJobState(batch, 30*time.Second, "RUNNING")

	attempts := func(result string) float64 {
		return counter(t, "scheduler_schedule_attempts_total", map[string]string{"profile": "sunk-scheduler", "result": result})
	}
	failed0, bound0 := attempts("unschedulable"), attempts("scheduled")
	preempt0 := counter(t, "scheduler_preemption_attempts_total", nil)
	pod := e.createPod("waits", onNode(host), withAnnotations(wellknown.AnnotationPartition, "all"))
	e.waitEvent(pod, "SlurmPending", "is PENDING", 60*time.Second)
	e.eventually("pending reason on the pod", 30*time.Second, func() (bool, string) {
		c := scheduledCondition(e.getPod("waits"))
		return strings.Contains(c, "is PENDING"), c
	})
	if err := e.sc.CancelJob(e.ctx, batch); err != nil {
		t.Fatal(err)
	}
	got := e.waitBound("waits", 90*time.Second)
	if got.Spec.NodeName != host {
		t.Fatalf("bound to %s, want %s", got.Spec.NodeName, host)
	}
	// The job waited in Slurm's queue: an event says where it started.
	e.waitEvent(got, "SlurmAllocated", "Slurm node "+sn, 10*time.Second)
	failed, bound := attempts("unschedulable")-failed0, attempts("scheduled")-bound0
	preempt := counter(t, "scheduler_preemption_attempts_total", nil) - preempt0
	t.Logf("scheduling attempts: %v failed, %v bound; preemption attempts %v", failed, bound, preempt)
	if failed != 0 || bound != 1 || preempt != 0 {
		t.Errorf("scheduling attempts: %v failed, %v bound, want 0 and 1; preemption attempts %v, want 0", failed, bound, preempt)
	}
}

// A gang of 3 is one 3-node job; no member is bound (nor a job submitted) until all 3 exist,
// then all are bound, one per node Slurm allocated. Its comment names the gang, not the members.
// A restarted scheduler finds the job's members again: when one is deleted, it cancels the job
// and evicts the others.
func TestGangOfThree(t *testing.T) {
	started := time.Now()
	e := setup(t)
	stop := e.startScheduler("")
	gang := withAnnotations(wellknown.AnnotationGang, "g", wellknown.AnnotationGangSize, "3")
	var pods []*v1.Pod
	for i := range 2 {
		pods = append(pods, e.createPod(fmt.Sprintf("g-%d", i), gang))
	}
	for _, p := range pods {
		e.eventually(p.Name+" waits for its gang", 30*time.Second, func() (bool, string) {
			c := scheduledCondition(e.getPod(p.Name))
			return strings.Contains(c, "gang g has 2 of 3 pods"), c
		})
		// Jobs of the same name from an earlier run stay listed for MinJobAge: only this run's count.
		for _, j := range e.jobsNamed("sunk-gang-" + testNS + "-g") {
			if !j.SubmitTime.Before(started.Truncate(time.Second)) {
				t.Fatalf("incomplete gang got job %d (%v)", j.ID, j.State)
			}
		}
		if got := e.getPod(p.Name); got.Spec.NodeName != "" {
			t.Fatalf("%s bound to %s before its gang was complete", p.Name, got.Spec.NodeName)
		}
	}
	pods = append(pods, e.createPod("g-2", gang))
	var job *slurm.Job
	var nodes []string
	for _, p := range pods {
		b := e.waitBound(p.Name, 120*time.Second)
		j := e.jobOfPod(b)
		if job == nil {
			job = j
		}
		if j.ID != job.ID {
			t.Fatalf("gang members in different jobs: %d and %d", job.ID, j.ID)
		}
		nodes = append(nodes, b.Spec.NodeName)
	}
	slurmNodes, err := slurm.ExpandHostlist(job.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, sn := range slurmNodes {
		hosts = append(hosts, e.hostOf[sn])
	}
	slices.Sort(hosts)
	slices.Sort(nodes)
	if job.NodeCount != 3 || !slices.Equal(hosts, nodes) || slices.Compact(slices.Clone(nodes))[2] == "" {
		t.Fatalf("gang job %d on %s (%d nodes, hosts %v); pods bound to %v", job.ID, job.Nodes, job.NodeCount, hosts, nodes)
	}
	if !strings.HasPrefix(job.Comment, "sunk-gang:") || !strings.Contains(job.Comment, ";mark=v1.") || len(job.Comment) > 128 {
		t.Fatalf("gang job %d comment %q", job.ID, job.Comment)
	}
	// A restarted scheduler leaves the bound gang and its job alone, then, when one member is
	// deleted, cancels the gang's job and evicts the others.
	stop()
	orphan, err := e.sc.SubmitJob(e.ctx, slurm.JobSubmit{Name: "sunk-orphan", Script: "#!/bin/sh\nsleep 600\n",
		Comment: e.marked("sunk-gang:00000000000000000000000000000dead"), Hold: true, Tasks: 1, StdOut: "/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	e.startScheduler("")
	// The orphan (a gang job no pods match) cancelled: the restarted scheduler has made a pass.
	e.waitJobState(orphan.JobID, 90*time.Second, "CANCELLED")
	for _, p := range pods {
		if got := e.getPod(p.Name); got.DeletionTimestamp != nil || got.Spec.NodeName == "" {
			t.Fatalf("%s disturbed by the restart", p.Name)
		}
	}
	if j := e.job(job.ID); j.BaseState() != "RUNNING" {
		t.Fatalf("gang job %d is %v after the restart", job.ID, j.State)
	}
	e.deletePod("g-0")
	e.waitJobState(job.ID, 30*time.Second, "CANCELLED")
	for _, p := range pods[1:] {
		e.eventually(p.Name+" evicted", 30*time.Second, func() (bool, string) {
			got, err := e.cs.CoreV1().Pods(testNS).Get(e.ctx, p.Name, metav1.GetOptions{})
			return err != nil || got.DeletionTimestamp != nil, "not deleting"
		})
	}
}

// marked is a placeholder comment with its mark under the tests' key.
func (e *env) marked(comment string) string {
	e.t.Helper()
	c, err := plugin.MarkedComment(e.markKeyFile, comment)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// A restarted scheduler adopts a pod whose job a previous scheduler submitted (one job, bound to
// its node), keeps bound pods and their jobs, and cancels a placeholder job whose pod is gone.
func TestRestartAdoption(t *testing.T) {
	e := setup(t)
	stopA := e.startScheduler("")
	r1 := e.createPod("r1")
	r1 = e.waitBound("r1", 90*time.Second)
	j1 := e.jobOfPod(r1)
	stopA()

	orphan, err := e.sc.SubmitJob(e.ctx, slurm.JobSubmit{Name: "sunk-orphan", Script: "#!/bin/sh\nsleep 600\n",
		Comment: e.marked("sunk-pod:00000000-0000-0000-0000-00000000dead"), Hold: true, Tasks: 1, StdOut: "/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	r2 := e.createPod("r2")
	adopted, err := e.sc.SubmitJob(e.ctx, slurm.JobSubmit{Name: "sunk-default-r2", Script: "#!/bin/sh\nexec sleep infinity\n",
		Comment: e.marked("sunk-pod:" + string(r2.UID)), Tasks: 1, CPUsPerTask: 1, MemoryPerNodeMB: 100, Exclusive: true, StdOut: "/dev/null",
		ExcludedNodes: []string{j1.Nodes}})
	if err != nil {
		t.Fatal(err)
	}
	running := e.waitJobState(adopted.JobID, 60*time.Second, "RUNNING")

	e.startScheduler("")
	e.waitJobState(orphan.JobID, 90*time.Second, "CANCELLED") // the first full job list after a restart may be slow
	r2 = e.waitBound("r2", 90*time.Second)
	if want := e.hostOf[running.Nodes]; r2.Spec.NodeName != want {
		t.Fatalf("adopted pod bound to %s, its job runs on %s (host %s)", r2.Spec.NodeName, running.Nodes, want)
	}
	if jobs := e.jobsNaming(string(r2.UID)); len(jobs) != 1 || jobs[0].ID != adopted.JobID {
		t.Fatalf("pod r2 has jobs %v, want only %d", jobs, adopted.JobID)
	}
	if p := e.getPod("r1"); p.DeletionTimestamp != nil || p.Spec.NodeName != r1.Spec.NodeName {
		t.Fatalf("r1 disturbed by the restart: node %s deleting %v", p.Spec.NodeName, p.DeletionTimestamp)
	}
	if j := e.job(j1.ID); j.BaseState() != "RUNNING" {
		t.Fatalf("r1's job %d is %v after the restart", j1.ID, j.State)
	}
}

// A job with a copied placeholder comment changes nothing: the victim pod stays bound, its job
// runs, and the copy is not the scheduler's to cancel. Two copies: another Slurm user's with the
// whole comment, mark included (squeue -o %k shows it), and one of the scheduler's own Slurm user
// (another sunk component, an admin) with the comment's body and no mark. Each is counted once in
// sunk_scheduler_jobs_untrusted_total.
func TestForgedCommentIsIgnored(t *testing.T) {
	e := setup(t)
	e.startScheduler(defaultProfile)
	victim := e.waitBound(e.createPod("victim").Name, 90*time.Second)
	j := e.jobOfPod(victim)
	body, _, marked := strings.Cut(j.Comment, ";mark=")
	if !marked || !strings.HasSuffix(body, string(victim.UID)) {
		t.Fatalf("the victim's job %d has comment %q, want sunk-pod:%s;mark=...", j.ID, j.Comment, victim.UID)
	}
	owner := counter(t, "sunk_scheduler_jobs_untrusted_total", map[string]string{"reason": "owner"})
	mark := counter(t, "sunk_scheduler_jobs_untrusted_total", map[string]string{"reason": "mark"})

	// Another Slurm user: slurmrestd takes the JWT's user name, and nobody exists on every host.
	tokens, err := slurm.NewJWTSourceFromFile("nobody", e.slurm.JWTKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := slurm.New(slurm.Config{URL: e.slurm.RESTURL, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	copied := e.holdJob(mallory, j.Comment, "nobody")
	unmarked := e.holdJob(e.sc, body, e.slurm.User)

	e.eventually("both copies counted as untrusted", 10*time.Second, func() (bool, string) {
		o := counter(t, "sunk_scheduler_jobs_untrusted_total", map[string]string{"reason": "owner"}) - owner
		m := counter(t, "sunk_scheduler_jobs_untrusted_total", map[string]string{"reason": "mark"}) - mark
		return o == 1 && m == 1, fmt.Sprintf("owner +%v, mark +%v", o, m)
	})
	// Ten more scheduler polls: the victim keeps its pod and its job, the copies stay held.
	deadline := time.Now().Add(10 * 200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if p := e.getPod("victim"); p.DeletionTimestamp != nil || p.Spec.NodeName != victim.Spec.NodeName || p.Annotations[wellknown.AnnotationJob] != victim.Annotations[wellknown.AnnotationJob] {
			t.Fatalf("the victim pod was touched: deleted at %v, node %q, job %q (conditions %v)", p.DeletionTimestamp, p.Spec.NodeName, p.Annotations[wellknown.AnnotationJob], p.Status.Conditions)
		}
		if vj := e.job(j.ID); vj.BaseState() != "RUNNING" {
			t.Fatalf("the victim's job %d is %v", j.ID, vj.State)
		}
		for _, id := range []uint32{copied, unmarked} {
			if fj := e.job(id); fj.BaseState() != "PENDING" {
				t.Fatalf("the copy %d is %v: the scheduler acted on it", id, fj.State)
			}
		}
	}
	if o := counter(t, "sunk_scheduler_jobs_untrusted_total", map[string]string{"reason": "owner"}) - owner; o != 1 {
		t.Fatalf("the other user's copy was counted %v times, want once", o)
	}
}

// holdJob submits a held job with this comment through client, whose jobs belong to user.
func (e *env) holdJob(client slurm.Client, comment, user string) uint32 {
	e.t.Helper()
	res, err := client.SubmitJob(e.ctx, slurm.JobSubmit{Name: "sunk-sched-test-forged", Script: "#!/bin/sh\ntrue\n",
		Comment: comment, Hold: true, Tasks: 1, StdOut: "/dev/null"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.sc.CancelJob(e.ctx, res.JobID) })
	if j := e.job(res.JobID); j.UserName != user || j.Comment != comment {
		e.t.Fatalf("copy %d: user %q comment %q, want %q %q", j.ID, j.UserName, j.Comment, user, comment)
	}
	return res.JobID
}

// A pod of a namespace without rights to partition urgent is refused: its condition
// (PodScheduled=False, SlurmPolicyDenied) and an event name the policy, it gets no Slurm job,
// costs no scheduling cycle and preempts nothing (a batch job holds its node). When the admin
// gives its namespace the partition and preemption, the same pod is let in at once, and
// preempts.
func TestPolicyRefusesPartition(t *testing.T) {
	e := setup(t)
	const ns = "tenant-b"
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startScheduler("")
	sn := e.slurm.Nodes[0]
	host := e.hostOf[sn]
	batch := e.sbatch("-p", "all", "-w", sn, "--exclusive")
	e.waitJobState(batch, 30*time.Second, "RUNNING")

	attempts := func(result string) float64 {
		return counter(t, "scheduler_schedule_attempts_total", map[string]string{"profile": "sunk-scheduler", "result": result})
	}
	failed0 := attempts("unschedulable")
	preempt0 := counter(t, "scheduler_preemption_attempts_total", nil)
	pod := e.createPod("refused", inNamespace(ns), onNode(host), withAnnotations(wellknown.AnnotationPartition, "urgent"))
	var cond v1.PodCondition
	e.eventually("the policy refusal on the pod", 30*time.Second, func() (bool, string) {
		p, err := e.cs.CoreV1().Pods(ns).Get(e.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled {
				cond = c
			}
		}
		return cond.Reason == "SlurmPolicyDenied", scheduledCondition(p)
	})
	want := `SlurmCluster slurm/c1 spec.schedulerPolicy: namespace tenant-b (in no tenant) may not use partition "urgent"`
	if cond.Status != v1.ConditionFalse || !strings.HasPrefix(cond.Message, want) {
		t.Fatalf("condition %s %s: %q, want False with %q", cond.Status, cond.Reason, cond.Message, want)
	}
	e.waitEvent(pod, "SlurmPolicyDenied", "may not use partition", 10*time.Second)
	if jobs := e.jobsNaming(string(pod.UID)); len(jobs) != 0 {
		t.Fatalf("a refused pod got jobs %v", jobs)
	}
	if j := e.job(batch); j.BaseState() != "RUNNING" {
		t.Fatalf("the batch job %d is %v under a refused pod", batch, j.State)
	}
	if failed, preempt := attempts("unschedulable")-failed0, counter(t, "scheduler_preemption_attempts_total", nil)-preempt0; failed != 0 || preempt != 0 {
		t.Fatalf("a refused pod cost %v failed scheduling attempts and %v preemption attempts, want none", failed, preempt)
	}

	// The admin lets tenant-b use urgent, and preempt, and charges its jobs to its own account:
	// the waiting pod goes through, its job preempts the batch job, and Slurm has the job
	// charged to the tenant's default account (the pod names none).
	e.setTenants(testsTenant, sunkv1.SchedulerTenant{Name: "b", Namespaces: []string{ns}, Partitions: []string{"urgent"}, Preempt: true,
		Accounts: []string{"team-b"}, DefaultAccount: "team-b"})
	var bound *v1.Pod
	e.eventually("the pod bound once its namespace may use urgent", 90*time.Second, func() (bool, string) {
		p, err := e.cs.CoreV1().Pods(ns).Get(e.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		bound = p
		return p.Spec.NodeName == host, scheduledCondition(p)
	})
	e.waitJobState(batch, 30*time.Second, "PREEMPTED")
	if j := e.jobOfPod(bound); j.Account != "team-b" {
		t.Fatalf("job %d of tenant b's pod is charged to %q, want its default account team-b", j.ID, j.Account)
	}
	_ = e.cs.CoreV1().Pods(ns).Delete(e.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}
