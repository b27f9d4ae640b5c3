package slurmcluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// reconfigureCounter is a slurm.Client whose Reconfigure answers err and counts its calls.
type reconfigureCounter struct {
	slurm.Client
	calls int
	err   error
}

func (c *reconfigureCounter) Reconfigure(context.Context) error { c.calls++; return c.err }

func TestReconfigureHoldsBackAfterAFailure(t *testing.T) {
	r := &Reconciler{}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{UID: "c1"}}
	other := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{UID: "c2"}}
	sl := &reconfigureCounter{err: errors.New("context deadline exceeded")}
	ctx := context.Background()

	if err := r.reconfigure(ctx, sc, sl, "to test"); err == nil || errors.As(err, new(*reconfigureHeldError)) ||
		!errors.Is(err, sl.err) || !strings.Contains(err.Error(), "to test") {
		t.Fatalf("first reconfigure: %v, want the client's error, naming the purpose", err)
	}
	// Every step that reconfigures polls every few seconds: none sends again within the minute.
	for i := 0; i < 3; i++ {
		var held *reconfigureHeldError
		if err := r.reconfigure(ctx, sc, sl, "to test"); !errors.As(err, &held) {
			t.Fatalf("reconfigure %d after a failure: %v, want held back", i+2, err)
		}
	}
	if sl.calls != 1 {
		t.Fatalf("%d reconfigure requests within %s of a failure, want 1", sl.calls, reconfigureRetry)
	}
	// Another cluster is not held back.
	if err := r.reconfigure(ctx, other, sl, "to test"); err == nil || sl.calls != 2 {
		t.Fatalf("another cluster's reconfigure: %v after %d calls", err, sl.calls)
	}
	// Once the minute has passed it is sent again; a success clears the failure.
	v, _ := r.reconfigureFailed.Load(sc.UID)
	f := v.(reconfigureFailure)
	f.at = f.at.Add(-reconfigureRetry)
	r.reconfigureFailed.Store(sc.UID, f)
	sl.err = nil
	if err := r.reconfigure(ctx, sc, sl, "to test"); err != nil || sl.calls != 3 {
		t.Fatalf("reconfigure after %s: %v after %d calls", reconfigureRetry, err, sl.calls)
	}
	if err := r.reconfigure(ctx, sc, sl, "to test"); err != nil || sl.calls != 4 {
		t.Fatalf("reconfigure after a success: %v after %d calls", err, sl.calls)
	}
}
