package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/test/wait"
)

// A pod whose job Slurm refuses (9 GPUs where nodes have 8) is not submitted again on every
// attempt: its refusal stands, shown on each one, until something that decides Slurm's answer
// changes (a Slurm node's GRES here), or refusalRetry has passed. Before, each attempt after
// the one that showed the refusal (the queue's five-minute flush) submitted the same job again.
func TestRefusedPodIsNotSubmittedAgain(t *testing.T) {
	ctx := context.Background()
	fk := slurmfake.New()
	const words = "Requested node configuration is not available"
	fk.SetError("SubmitJob", &slurm.SlurmError{Endpoint: "slurmfake submit", HTTPStatus: 500, Code: 2014,
		Errors: []slurm.ErrorDetail{{Code: 2014, Error: words, Description: "Job submission failed", Source: "slurm_submit_batch_job()"}}})
	b := newTestBed(t, 2, nil, fk)
	p := b.addPod(pod(nil, v1.ResourceList{ResourceGPU: resource.MustParse("9")}))

	if st := b.p.PreEnqueue(ctx, p); st.IsSuccess() || !strings.Contains(st.Message(), "submitting") {
		t.Fatalf("a new pod: %v, want held while its job is submitted", st)
	}
	waitRefused(t, b, p)
	attempt := func() *framework.Status {
		t.Helper()
		if st := b.p.PreEnqueue(ctx, p); !st.IsSuccess() {
			t.Fatalf("PreEnqueue of the refused pod: %v, want it let in to show the refusal", st)
		}
		_, st := b.p.PreFilter(ctx, framework.NewCycleState(), p)
		return st
	}
	for i := range 3 {
		st := attempt()
		if st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "Slurm refused the job") || !strings.Contains(st.Message(), words) {
			t.Fatalf("attempt %d: %v, want Slurm's refusal, unresolvable", i+1, st)
		}
		if err := b.p.reconcile(ctx, klog.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := fk.Calls("SubmitJob"); n != 1 {
		t.Fatalf("%d submissions over four attempts, want 1", n)
	}

	// A Slurm node with more GPUs: Slurm may answer otherwise, so the pod asks again.
	fk.AddNode(slurm.Node{Name: "n2", Gres: "gpu:h100:16"})
	b.poll(b.p)
	if st := b.p.PreEnqueue(ctx, p); st.IsSuccess() || !strings.Contains(st.Message(), "submitting") {
		t.Fatalf("after a node changed: %v, want a new submission", st)
	}
	waitRefused(t, b, p)
	if n := fk.Calls("SubmitJob"); n != 2 {
		t.Fatalf("%d submissions after a node changed, want 2", n)
	}

	// Nothing changed, but the refusal is old: once more.
	b.p.mu.Lock()
	r := b.p.refused[p.UID]
	r.at = r.at.Add(-refusalRetry)
	b.p.refused[p.UID] = r
	b.p.mu.Unlock()
	if st := b.p.PreEnqueue(ctx, p); st.IsSuccess() || !strings.Contains(st.Message(), "submitting") {
		t.Fatalf("an old refusal: %v, want a new submission", st)
	}
	waitRefused(t, b, p)
	if n := fk.Calls("SubmitJob"); n != 3 {
		t.Fatalf("%d submissions after the refusal aged, want 3", n)
	}

	// A pod that is gone leaves no refusal behind.
	b.deletePod(p)
	if err := b.p.reconcile(ctx, klog.Background()); err != nil {
		t.Fatal(err)
	}
	b.p.mu.Lock()
	n := len(b.p.refused)
	b.p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d refusals kept for pods that are gone", n)
	}
}

// waitRefused waits until the pod's submission has ended in a refusal.
func waitRefused(t *testing.T, b *testBed, p *v1.Pod) {
	t.Helper()
	wait.For(t, "the pod's job refused", 5*time.Second, time.Millisecond, func() error {
		b.p.mu.Lock()
		_, refused := b.p.refused[p.UID]
		busy := b.p.inflight[p.UID]
		b.p.mu.Unlock()
		if !refused || busy {
			return fmt.Errorf("refused %t, submitting %t", refused, busy)
		}
		return nil
	})
}
