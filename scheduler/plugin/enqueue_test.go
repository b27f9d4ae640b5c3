package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

// A pod waiting on Slurm stays out of the scheduling queue (PreEnqueue) instead of failing a
// cycle per change: while its job is submitted (from PreEnqueue itself, for a single pod) and
// while it pends. It is let in when the job runs, and the loop activates it then (and once more
// on the next pass); meanwhile the loop writes the pending reason into its condition. A pod
// that reaches PreFilter while its job is being submitted is unresolvable, so that no
// preemption runs.
func TestWaitingPodsStayOutOfTheQueue(t *testing.T) {
	ctx := context.Background()
	fk := slurmfake.New()
	hc := newHookClient(t, fk, false)
	b := newTestBed(t, 2, hc, fk)
	pod := b.addPod(pod(nil, nil))
	if st := b.p.PreEnqueue(ctx, pod); st.IsSuccess() || !strings.Contains(st.Message(), "submitting") {
		t.Fatalf("a new pod: %v, want held while its job is submitted", st)
	}
	if _, st := b.p.PreFilter(ctx, framework.NewCycleState(), pod); st.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter while submitting: %v, want UnschedulableAndUnresolvable (no preemption)", st)
	}
	res := waitForJob(t, b, fk, pod)
	b.poll(b.p)
	if st := b.p.PreEnqueue(ctx, pod); st.IsSuccess() {
		t.Fatal("a pod whose job pends was let in")
	}
	// Not considered by Slurm yet (reason None): nothing to report.
	if err := b.p.reconcile(ctx, klog.Background()); err != nil {
		t.Fatal(err)
	}
	j, _ := fk.GetJob(ctx, res.ID)
	j.StateReason = "Priority"
	fk.AddJob(*j)
	b.poll(b.p)
	if err := b.p.reconcile(ctx, klog.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the pending reason in the pod's condition", 5*time.Second, time.Millisecond, func() error {
		got, err := b.h.cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Conditions) != 1 || !strings.Contains(got.Status.Conditions[0].Message, "is PENDING: Priority") {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})

	j, _ = fk.GetJob(ctx, res.ID)
	j.State, j.Nodes = []string{"RUNNING"}, "n2"
	fk.AddJob(*j)
	b.poll(b.p)
	if st := b.p.PreEnqueue(ctx, pod); !st.IsSuccess() {
		t.Fatalf("a pod whose job runs: %v", st)
	}
	b.h.mu.Lock()
	b.h.activated = nil
	b.h.mu.Unlock()
	for range 3 {
		if err := b.p.reconcile(ctx, klog.Background()); err != nil {
			t.Fatal(err)
		}
	}
	b.h.mu.Lock()
	activated := slices.Clone(b.h.activated)
	b.h.mu.Unlock()
	if want := []string{"ns/p", "ns/p"}; !slices.Equal(activated, want) {
		t.Fatalf("activations over three passes after the start: %v, want %v", activated, want)
	}
	if _, st, passed := b.cycle(b.p, pod); !st.IsSuccess() || !slices.Equal(passed, []string{"k2"}) {
		t.Fatalf("the cycle after the start: %v, nodes %v", st, passed)
	}
	if n := fk.Calls("SubmitJob"); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
}

// waitForJob waits until the pod's job submitted from PreEnqueue is in Slurm and the plugin
// knows its id, and returns it.
func waitForJob(t *testing.T, b *testBed, fk *slurmfake.Fake, pod *v1.Pod) *slurm.Job {
	t.Helper()
	var job *slurm.Job
	wait.For(t, "the pod's job submitted", 5*time.Second, time.Millisecond, func() error {
		b.p.mu.Lock()
		id, ok := b.p.lastJob[podJobKey(pod.UID)]
		busy := b.p.inflight[pod.UID]
		b.p.mu.Unlock()
		if !ok || busy {
			return fmt.Errorf("not yet")
		}
		j, err := fk.GetJob(context.Background(), id)
		job = j
		return err
	})
	return job
}

// TestSubmitFromTheQueueKeepsToAllowedNodes: the job of a pod submitted from PreEnqueue excludes
// the Slurm nodes on Kubernetes nodes the pod's node selector or an untolerated taint rules out,
// but not a node another job's lock taints (excluded, it stayed out of the job for good);
// a gang member and a pod with a bad annotation take the cycle path (nothing submitted).
func TestSubmitFromTheQueueKeepsToAllowedNodes(t *testing.T) {
	ctx := context.Background()
	fk := slurmfake.New()
	b := newTestBed(t, 3, nil, fk)
	k2, _ := b.h.cs.CoreV1().Nodes().Get(ctx, "k2", metav1.GetOptions{})
	k2.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "other", Effect: v1.TaintEffectNoSchedule}}
	if err := b.h.inf.Core().V1().Nodes().Informer().GetIndexer().Update(k2); err != nil {
		t.Fatal(err)
	}
	k3, _ := b.h.cs.CoreV1().Nodes().Get(ctx, "k3", metav1.GetOptions{})
	k3.Labels = map[string]string{"zone": "b"}
	// Another job's node lock is Slurm's to arbitrate: the node is the job's once that job ends.
	k3.Spec.Taints = []v1.Taint{lockTaint("99")}
	if err := b.h.inf.Core().V1().Nodes().Informer().GetIndexer().Update(k3); err != nil {
		t.Fatal(err)
	}
	p := pod(nil, nil)
	p.Spec.NodeSelector = map[string]string{"zone": "b"}
	p = b.addPod(p)
	if st := b.p.PreEnqueue(ctx, p); st.IsSuccess() {
		t.Fatal("a new pod was let in before its job")
	}
	if j := waitForJob(t, b, fk, p); j.ExcludedNodes != "n[1-2]" {
		t.Fatalf("excluded nodes %q, want n[1-2] (k1 has no zone b, k2 a taint; k3's lock is Slurm's)", j.ExcludedNodes)
	}

	members := b.gang("g", 2)
	bad := pod(map[string]string{wellknown.AnnotationTimeLimit: "soon"}, nil)
	bad.Name, bad.UID = "bad", "u-bad"
	for _, q := range append(members, b.addPod(bad)) {
		if st := b.p.PreEnqueue(ctx, q); !st.IsSuccess() {
			t.Fatalf("%s: %v, want let in (the cycle submits gangs and reports bad annotations)", q.Name, st)
		}
	}
	if n := fk.Calls("SubmitJob"); n != 1 {
		t.Fatalf("%d submissions, want only the single pod's", n)
	}
}
