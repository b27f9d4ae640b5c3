package slurmcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// reconfigureRetry is how long after a failed `scontrol reconfigure` the operator sends the
// next one to the same cluster. A request that timed out may still be carried out: slurmctld
// saves its state and re-executes itself, which on a loaded machine took longer than the REST
// client waits (15 s). Sent again every few seconds, as each caller's poll did, the next request
// reached a slurmctld still starting, and again, under load: the auth key rotation's round 1
// then did not complete in 4 minutes, and in another run of that test slurmctld exited with
// SIGSEGV (exit 139) during the rotation.
const reconfigureRetry = time.Minute

// reconfigureFailure is a cluster's last failed reconfigure.
type reconfigureFailure struct {
	at  time.Time
	err error
}

// reconfigureHeldError says that a reconfigure is not sent because the last one failed less
// than reconfigureRetry ago.
type reconfigureHeldError struct{ last reconfigureFailure }

func (e *reconfigureHeldError) Error() string {
	return fmt.Sprintf("the last scontrol reconfigure over REST failed %s ago (%v); the next is sent %s after it",
		time.Since(e.last.at).Round(time.Second), e.last.err, reconfigureRetry)
}

// reconfigure sends `scontrol reconfigure` over REST for purpose ("to load ..."): the one way
// every step of the operator makes slurmctld reread its configuration and keys, so that a
// failure holds back all of them. A failure is recorded as a Warning event ReconfigureFailed
// and returned as a sentence naming purpose. A request that never left (no connection to
// slurmrestd: its Service's endpoints reach kube-proxy a moment after its Deployment is ready,
// the usual first attempt of a new cluster), or that slurmrestd could not pass on to slurmctld
// (slurm.NotDelivered), cannot have been carried out: it is returned without an event and
// without holding the next one back. It returns a *reconfigureHeldError, without
// sending and without an event, when the last one failed less than reconfigureRetry ago.
func (r *Reconciler) reconfigure(ctx context.Context, sc *sunkv1.SlurmCluster, sl slurm.Client, purpose string) error {
	if v, ok := r.reconfigureFailed.Load(sc.UID); ok {
		if last := v.(reconfigureFailure); time.Since(last.at) < reconfigureRetry {
			return &reconfigureHeldError{last: last}
		}
	}
	at := time.Now()
	if err := sl.Reconfigure(ctx); err != nil {
		if neverSent(err) {
			return fmt.Errorf("scontrol reconfigure over REST %s: %w: %w", purpose, errRestNotReachable, err)
		}
		if slurm.NotDelivered(err) {
			// slurmrestd found no slurmctld (a new cluster's: its Service's name may not
			// resolve yet, CoreDNS caching the first miss): nothing was reconfigured.
			return fmt.Errorf("scontrol reconfigure over REST %s: %w: %w", purpose, errCtldNotReachable, err)
		}
		r.reconfigureFailed.Store(sc.UID, reconfigureFailure{at: at, err: err})
		err = fmt.Errorf("scontrol reconfigure over REST %s failed: %w", purpose, err)
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonReconfigureFailed, err.Error())
		return err
	}
	r.reconfigureFailed.Delete(sc.UID)
	return nil
}

// errRestNotReachable marks a reconfigure that never reached slurmrestd: the condition says
// the cluster waits for slurmrestd (WaitingForRestAPI), not that the reconfigure failed.
// errCtldNotReachable marks one slurmrestd could not pass on to slurmctld (WaitingForController).
var (
	errRestNotReachable = errors.New("slurmrestd not reachable yet")
	errCtldNotReachable = errors.New("slurmrestd cannot reach slurmctld yet")
)

// neverSent says whether err is a failure to connect, before any request was written.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
