package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// A pod waiting on Slurm stays out of the scheduling queue (PreEnqueue) instead of failing a
// cycle per change: while its job is submitted and while it pends. It is let in when the job
// runs, and the loop activates it then (and once more on the next pass); meanwhile the loop
// writes the pending reason into its condition. A pod that reaches
// PreFilter while its job is being submitted is unresolvable, so that no preemption runs.
func TestWaitingPodsStayOutOfTheQueue(t *testing.T) {
	ctx := context.Background()
	fk := slurmfake.New()
	hc := newHookClient(t, fk, false)
	b := newTestBed(t, 2, hc, fk)
	pod := b.addPod(pod(nil, nil))
	if st := b.p.PreEnqueue(ctx, pod); !st.IsSuccess() {
		t.Fatalf("a new pod: %v", st)
	}
	b.p.mu.Lock()
	b.p.inflight[pod.UID] = true
	b.p.mu.Unlock()
	if st := b.p.PreEnqueue(ctx, pod); st.IsSuccess() {
		t.Fatal("a pod whose job is being submitted was let in")
	}
	if _, st := b.p.PreFilter(ctx, framework.NewCycleState(), pod); st.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter while submitting: %v, want UnschedulableAndUnresolvable (no preemption)", st)
	}
	b.p.mu.Lock()
	delete(b.p.inflight, pod.UID)
	b.p.mu.Unlock()

	res, err := fk.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\n", Comment: testMarker.comment(podJobKey(pod.UID))})
	if err != nil {
		t.Fatal(err)
	}
	b.poll(b.p)
	if st := b.p.PreEnqueue(ctx, pod); st.IsSuccess() {
		t.Fatal("a pod whose job pends was let in")
	}
	if err := b.p.reconcile(ctx, klog.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := b.h.cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || !strings.Contains(got.Status.Conditions[0].Message, "is PENDING") {
		t.Fatalf("the pending pod's conditions %+v, want the pending reason", got.Status.Conditions)
	}

	j, _ := fk.GetJob(ctx, res.JobID)
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
}
