package cmdutil

import (
	"flag"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// The leader Lease's timings. Longer than client-go's 15/10/2 s: a leader that cannot renew
// within the deadline stops, and a controller restarted by a slow API server lists and
// watches everything again, which slows that API server further. A soak on a saturated
// 2-core test bed lost the syncer that way once (charts/sunk/README.md, leaderElectionTimings).
const (
	DefaultLeaseDuration = 30 * time.Second
	DefaultRenewDeadline = 20 * time.Second
	DefaultRetryPeriod   = 5 * time.Second
)

// LeaderElectionFlags registers --leader-elect-lease-duration, --leader-elect-renew-deadline
// and --leader-elect-retry-period (kube-scheduler's names, which keeps its own 15/10/2 s), which
// the operator and the syncer share, and returns a function that sets them on the manager's options once parsed.
func LeaderElectionFlags() func(*ctrl.Options) {
	lease := flag.Duration("leader-elect-lease-duration", DefaultLeaseDuration, "how long a standby waits before it takes a Lease its holder stopped renewing (a holder that stops cleanly gives it up at once)")
	renew := flag.Duration("leader-elect-renew-deadline", DefaultRenewDeadline, "how long the leader keeps trying to renew its Lease before it stops leading; shorter than the lease duration")
	retry := flag.Duration("leader-elect-retry-period", DefaultRetryPeriod, "how often the leader renews and a standby tries to acquire the Lease")
	return func(o *ctrl.Options) {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = lease, renew, retry
	}
}
