//go:build integration

package integration

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestThousandMemberGang: a gang far larger than the test bed's three Slurm nodes is one Slurm
// job whose tasks each hold many members (packed: not exclusive, 5m CPU and 1Mi each, 200 to a
// task of one CPU), bound all or nothing: every member on the node whose share of the job's
// CPUs holds it. It prints the time from the first creation until all are bound:
//
//	bench: gang_members=1000 all_bound_s=… job_start_s=… first_bound_s=…
//
// 5m, not 10m: 1,000 members of 10m need 10 CPUs and the test bed has 6 (3 nodes of 2); Slurm
// holds what the members ask. SUNK_GANG_MEMBERS changes the count.
func TestThousandMemberGang(t *testing.T) {
	n := 1000
	if v := os.Getenv("SUNK_GANG_MEMBERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SUNK_GANG_MEMBERS=%q: want a positive integer", v)
		}
	}
	e := setup(t)
	e.gangTimeout = "60s"
	e.allowPods(n + 110)
	e.startScheduler("")

	member := func(p *v1.Pod) {
		p.Labels = map[string]string{"gang": "big"}
		p.Annotations = map[string]string{wellknown.AnnotationGang: "big", wellknown.AnnotationGangSize: strconv.Itoa(n),
			wellknown.AnnotationPartition: "bench", wellknown.AnnotationExclusive: "false"}
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("5m"), v1.ResourceMemory: resource.MustParse("1Mi")}
	}
	// Bound as a watch shows it (started before the first creation).
	var mu sync.Mutex
	boundAt := map[string]time.Duration{}
	nodeOf := map[string]string{}
	start := time.Now()
	e.watchBound("gang=big", start, &mu, boundAt, nodeOf)
	names, allCreated := e.createPods(member)
	for i := range n {
		names <- fmt.Sprintf("big-%04d", i)
	}
	close(names)
	allCreated()
	created := time.Since(start)

	e.eventually("all members bound", 5*time.Minute, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(boundAt) == n, fmt.Sprintf("%d of %d bound (created in %v)", len(boundAt), n, created)
	})
	allBound := time.Since(start)
	times := make([]time.Duration, 0, n)
	for _, d := range boundAt {
		times = append(times, d)
	}
	slices.Sort(times)

	// One job; on each node as many members as the job's CPUs there hold (200 to a CPU).
	var id uint32
	for _, p := range e.listPods("gang=big") {
		if p.Spec.NodeName == "" {
			t.Fatalf("%s unbound", p.Name)
		}
		jid, err := strconv.ParseUint(p.Annotations[wellknown.AnnotationJob], 10, 32)
		if err != nil {
			t.Fatalf("%s: job annotation %q", p.Name, p.Annotations[wellknown.AnnotationJob])
		}
		if id == 0 {
			id = uint32(jid)
		}
		if uint32(jid) != id {
			t.Fatalf("members in two jobs: %d and %d", id, jid)
		}
	}
	job := e.job(id)
	onHost := map[string]int{}
	for _, node := range nodeOf {
		onHost[node]++
	}
	room := map[string]int{}
	for _, a := range job.Allocation {
		room[e.hostOf[a.Node]] += a.CPUs * 200
	}
	for host, count := range onHost {
		if count > room[host] {
			t.Errorf("%d members on %s, where the job's CPUs hold %d (allocation %+v)", count, host, room[host], job.Allocation)
		}
	}
	t.Logf("job %d: %s, allocation %+v; members per node %v; created in %v", job.ID, job.Nodes, job.Allocation, onHost, created)
	jobStart := job.StartTime.Sub(start).Seconds()
	fmt.Printf("bench: gang_members=%d all_bound_s=%.3f job_start_s=%.3f first_bound_s=%.3f created_s=%.3f\n",
		n, allBound.Seconds(), jobStart, times[0].Seconds(), created.Seconds())
	// All or nothing: no member bound before the job ran (its start has a one-second resolution).
	if times[0].Seconds() < jobStart-1 {
		t.Errorf("a member bound %v after the start, before the job's start at %.1f s", times[0], jobStart)
	}

	// Deleting the gang cancels its job.
	if err := e.cs.CoreV1().Pods(testNS).DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: "gang=big"}); err != nil {
		t.Fatal(err)
	}
	e.waitJobState(job.ID, 60*time.Second, "CANCELLED")
}

// watchBound records, from a watch of the pods with the selector (re-established when the
// apiserver closes it), when each was first seen bound and where.
func (e *env) watchBound(selector string, start time.Time, mu *sync.Mutex, boundAt map[string]time.Duration, nodeOf map[string]string) {
	e.t.Helper()
	w, err := e.cs.CoreV1().Pods(testNS).Watch(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		for {
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*v1.Pod)
				if !ok || ev.Type == watch.Deleted || p.Spec.NodeName == "" {
					continue
				}
				mu.Lock()
				if _, seen := boundAt[p.Name]; !seen {
					boundAt[p.Name], nodeOf[p.Name] = time.Since(start), p.Spec.NodeName
				}
				mu.Unlock()
			}
			if e.ctx.Err() != nil {
				return
			}
			// Closed by the apiserver: list what is bound by now, then watch from there.
			l, err := e.cs.CoreV1().Pods(testNS).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				mu.Lock()
				for _, p := range l.Items {
					if _, seen := boundAt[p.Name]; !seen && p.Spec.NodeName != "" {
						boundAt[p.Name], nodeOf[p.Name] = time.Since(start), p.Spec.NodeName
					}
				}
				mu.Unlock()
				w, err = e.cs.CoreV1().Pods(testNS).Watch(e.ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: l.ResourceVersion})
			}
			if err != nil {
				return
			}
		}
	}()
}

// A gang whose member is deleted while its job waits in Slurm lets everything go: the job is
// cancelled, no member is bound, and the rest wait for a complete gang again.
func TestGangMemberDeletedWhilePending(t *testing.T) {
	e := setup(t)
	e.startScheduler("")
	// One node taken: a gang of three exclusive members (a node each) waits.
	blocker := e.sbatch("-p", "all", "-w", e.slurm.Nodes[0], "--exclusive")
	e.waitJobState(blocker, 30*time.Second, "RUNNING")
	gang := withAnnotations(wellknown.AnnotationGang, "w", wellknown.AnnotationGangSize, "3")
	var pods []*v1.Pod
	for i := range 3 {
		pods = append(pods, e.createPod(fmt.Sprintf("w-%d", i), gang))
	}
	var job slurm.Job
	e.eventually("the gang's job pending", 60*time.Second, func() (bool, string) {
		// Its immediate allocations, refused (the nodes are busy), are kept as FAILED.
		jobs := slices.DeleteFunc(e.jobsNamed("sunk-gang-"+testNS+"-w"), func(j slurm.Job) bool {
			return j.BaseState() == "FAILED" && j.Nodes == ""
		})
		if len(jobs) != 1 || jobs[0].BaseState() != "PENDING" {
			return false, fmt.Sprintf("jobs %+v", jobs)
		}
		job = jobs[0]
		return true, ""
	})
	e.deletePod("w-1")
	e.waitJobState(job.ID, 30*time.Second, "CANCELLED")
	for _, p := range []*v1.Pod{pods[0], pods[2]} {
		e.eventually(p.Name+" waits for a complete gang again", 30*time.Second, func() (bool, string) {
			got := e.getPod(p.Name)
			c := scheduledCondition(got)
			return got.Spec.NodeName == "" && strings.Contains(c, "gang w has 2 of 3 pods"), c
		})
	}
	for _, j := range e.jobsNamed("sunk-gang-" + testNS + "-w") {
		if !finished(&j) {
			t.Errorf("the gang has live job %d (%v) without all its members", j.ID, j.State)
		}
	}
	for _, host := range e.hostOf {
		if taint := e.nodeTaint(host); taint != "" {
			t.Errorf("node %s locked: %s", host, taint)
		}
	}
}

// allowPods raises the nodes' pod capacity (110, as a kubelet's default) for tests with more
// pods than that per node.
func (e *env) allowPods(n int) {
	e.t.Helper()
	for _, host := range e.hostOf {
		node, err := e.cs.CoreV1().Nodes().Get(e.ctx, host, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		q := resource.MustParse(strconv.Itoa(n))
		node.Status.Capacity[v1.ResourcePods], node.Status.Allocatable[v1.ResourcePods] = q, q
		if _, err := e.cs.CoreV1().Nodes().UpdateStatus(e.ctx, node, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// createPodAsync is createPod for other goroutines: an error is reported, not fatal there.
// createPods creates the pods named on the returned channel with 8 clients at once, as a burst
// arrives; once the channel is closed, the returned func waits for every creation.
func (e *env) createPods(opts ...podOpt) (chan<- string, func()) {
	names := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				e.createPodAsync(name, opts...)
			}
		}()
	}
	return names, wg.Wait
}

func (e *env) createPodAsync(name string, opts ...podOpt) {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       v1.PodSpec{SchedulerName: schedulerName, Containers: []v1.Container{{Name: "app", Image: "app"}}},
	}
	for _, o := range opts {
		o(p)
	}
	if _, err := e.cs.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Errorf("creating pod %s: %v", name, err)
	}
}

func (e *env) listPods(selector string) []v1.Pod {
	e.t.Helper()
	l, err := e.cs.CoreV1().Pods(testNS).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// TestLeaderWorkerSetGroupIsOneJob: the three pods of a LeaderWorkerSet group of size 3,
// labelled and annotated as the LWS controller and webhook make them (no sunk annotation), are
// one 3-node Slurm job: none is bound, nor a job submitted, until all three exist; then all are
// bound together, one per node Slurm allocated.
func TestLeaderWorkerSetGroupIsOneJob(t *testing.T) {
	started := time.Now()
	e := setup(t)
	e.startScheduler("")
	const gangName = "leaderworkerset/web/0"
	member := func(worker int) podOpt {
		return func(p *v1.Pod) {
			p.Labels = map[string]string{wellknown.LWSLabelName: "web", wellknown.LWSLabelGroupIndex: "0",
				wellknown.LWSLabelWorkerIndex: strconv.Itoa(worker)}
			p.Annotations = map[string]string{wellknown.LWSAnnotationSize: "3"}
			if worker > 0 {
				p.Annotations["leaderworkerset.sigs.k8s.io/leader-name"] = "web-0"
			}
		}
	}
	names := []string{"web-0", "web-0-1", "web-0-2"}
	for i, name := range names[:2] {
		e.createPod(name, member(i))
	}
	for _, name := range names[:2] {
		e.eventually(name+" waits for its group", 30*time.Second, func() (bool, string) {
			c := scheduledCondition(e.getPod(name))
			return strings.Contains(c, "gang "+gangName+" has 2 of 3 pods"), c
		})
		if got := e.getPod(name); got.Spec.NodeName != "" {
			t.Fatalf("%s bound to %s before its group was complete", name, got.Spec.NodeName)
		}
	}
	for _, j := range e.jobsNamed("sunk-gang-" + testNS + "-" + gangName) {
		if !j.SubmitTime.Before(started.Truncate(time.Second)) {
			t.Fatalf("incomplete group got job %d (%v)", j.ID, j.State)
		}
	}
	e.createPod(names[2], member(2))
	var job *slurm.Job
	var nodes []string
	for _, name := range names {
		b := e.waitBound(name, 120*time.Second)
		j := e.jobOfPod(b)
		if job == nil {
			job = j
		}
		if j.ID != job.ID {
			t.Fatalf("group members in different jobs: %d and %d", job.ID, j.ID)
		}
		nodes = append(nodes, b.Spec.NodeName)
	}
	slices.Sort(nodes)
	if job.NodeCount != 3 || job.Name != "sunk-gang-"+testNS+"-"+gangName || len(slices.Compact(nodes)) != 3 {
		t.Fatalf("group job %d %q on %s (%d nodes); pods bound to %v", job.ID, job.Name, job.Nodes, job.NodeCount, nodes)
	}
}
