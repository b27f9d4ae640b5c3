package slurmcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
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

// A request that never reached slurmrestd (refused connection, as a new cluster's first one
// is while kube-proxy learns the Service's endpoints) holds nothing back.
func TestReconfigureNotHeldBackWhenNeverSent(t *testing.T) {
	r := &Reconciler{}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{UID: "c1"}}
	refused := fmt.Errorf("slurm GET /openapi/v3: %w: %w", slurm.ErrUnavailable,
		&url.Error{Op: "Get", URL: "https://10.96.0.1:6820/openapi/v3", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	sl := &reconfigureCounter{err: refused}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		err := r.reconfigure(ctx, sc, sl, "to test")
		if err == nil || errors.As(err, new(*reconfigureHeldError)) || !errors.Is(err, errRestNotReachable) || !strings.Contains(err.Error(), "not reachable yet") {
			t.Fatalf("reconfigure %d with a refused connection: %v, want the error, not held back", i+1, err)
		}
	}
	if sl.calls != 2 {
		t.Fatalf("%d requests, want 2: a refused connection must not hold the next back", sl.calls)
	}
	// A read that timed out may have been carried out: that one holds back.
	sl.err = &url.Error{Op: "Post", URL: "https://10.96.0.1:6820/", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}}
	_ = r.reconfigure(ctx, sc, sl, "to test")
	if err := r.reconfigure(ctx, sc, sl, "to test"); !errors.As(err, new(*reconfigureHeldError)) {
		t.Fatalf("after a timed-out read: %v, want held back", err)
	}
}

// A request slurmrestd could not pass on (it found no slurmctld: a new cluster's controller
// Service whose name does not resolve yet) was not carried out either: it holds nothing back and
// says the cluster waits for its controller.
func TestReconfigureNotHeldBackWhenSlurmctldUnreached(t *testing.T) {
	r := &Reconciler{}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{UID: "c1"}}
	sl := &reconfigureCounter{err: &slurm.SlurmError{Endpoint: "GET /reconfigure", HTTPStatus: 502,
		Errors: []slurm.ErrorDetail{{Code: 1800, Error: "Unable to contact slurm controller (connect failure)"}}}}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		err := r.reconfigure(ctx, sc, sl, "to test")
		if err == nil || errors.As(err, new(*reconfigureHeldError)) || !errors.Is(err, errCtldNotReachable) {
			t.Fatalf("reconfigure %d that slurmrestd could not pass on: %v, want the error, not held back", i+1, err)
		}
	}
	if sl.calls != 2 {
		t.Fatalf("%d requests, want 2", sl.calls)
	}
}
