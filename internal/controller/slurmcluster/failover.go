// Which slurmctld serves: the primary, or with spec.controller.backup the backup once the
// primary is down.

package slurmcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
)

// Timeouts of the failover check. A Slurm client that finds no controller in charge retries
// them for up to 1.5 x SlurmctldTimeout, and slurmrestd answers only then: the check must
// not hold a reconcile that long, so not answering within serveTimeout reads as not serving.
const (
	serveTimeout = 5 * time.Second
	// pollWhileFailingOver is how soon to look again while the primary is down: the backup's
	// takeover changes no Kubernetes object, so no watch reports it.
	pollWhileFailingOver = 5 * time.Second
)

// controllerView is what the failover decision reads: the two slurmctld pods and, only when
// the primary's pod is not Ready and there is a backup, Slurm's own answer through slurmrestd.
type controllerView struct {
	Primary, Backup        string // pod names (Slurm host names)
	PrimaryReady           bool
	PrimaryProblem         string // why the primary's pod is not Ready
	HasBackup, BackupReady bool
	PrimaryResponds        bool  // slurmrestd's ping: the primary answers
	ServeErr               error // a request only a controller in charge answers; nil: answered
	Asked                  bool  // whether Slurm was asked (the two fields above)
}

// controllerCondition decides ControllerReady: True while some slurmctld serves, with reason
// BackupInCharge when it is the backup.
func controllerCondition(v controllerView) (ok bool, reason, msg string) {
	switch {
	case v.PrimaryReady:
		return true, sunkv1.ReasonReady, "slurmctld answers on " + v.Primary
	case !v.HasBackup:
		return false, sunkv1.ReasonNotReady, v.PrimaryProblem
	case !v.BackupReady:
		return false, sunkv1.ReasonPrimaryDown, fmt.Sprintf("the primary slurmctld is down (%s), and the backup %s is not ready either", v.PrimaryProblem, v.Backup)
	case !v.Asked:
		return false, sunkv1.ReasonPrimaryDown, fmt.Sprintf("the primary slurmctld is down (%s); whether the backup %s serves is not known yet", v.PrimaryProblem, v.Backup)
	case v.ServeErr != nil:
		return false, sunkv1.ReasonPrimaryDown, fmt.Sprintf("the primary slurmctld is down (%s), and the backup %s does not serve yet (it takes over once the primary has been silent for SlurmctldTimeout): %v",
			v.PrimaryProblem, v.Backup, v.ServeErr)
	case v.PrimaryResponds:
		// The primary answers Slurm although its pod is not Ready (a probe that timed out):
		// it serves.
		return true, sunkv1.ReasonReady, fmt.Sprintf("slurmctld answers on %s (its pod is not Ready: %s)", v.Primary, v.PrimaryProblem)
	default:
		return true, sunkv1.ReasonBackupInCharge, fmt.Sprintf("the backup slurmctld %s serves; the primary %s is down: %s", v.Backup, v.Primary, v.PrimaryProblem)
	}
}

// observeController sets ControllerReady, and says how soon to look again: while the primary
// is down, the backup's takeover is seen only by asking.
func (r *Reconciler) observeController(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, keys slurmconn.Keys, st *status) (time.Duration, error) {
	v := controllerView{Primary: n.ControllerPod(0), Backup: n.ControllerPod(1), HasBackup: sc.Spec.Controller.Backup}
	primary := &corev1.Pod{}
	if err := r.get(ctx, n, v.Primary, primary); err != nil {
		return 0, err
	}
	v.PrimaryReady = kube.PodReady(primary)
	v.PrimaryProblem = podProblem(primary, "slurmctld")
	if !v.PrimaryReady && v.HasBackup {
		backup := &corev1.Pod{}
		if err := r.get(ctx, n, v.Backup, backup); err != nil {
			return 0, err
		}
		v.BackupReady = kube.PodReady(backup)
		if v.BackupReady && meta.IsStatusConditionTrue(st.conditions, sunkv1.ConditionRestAPIReady) {
			v.Asked = true
			v.PrimaryResponds, v.ServeErr = r.whoServes(ctx, sc, n, keys)
		}
	}
	ok, reason, msg := controllerCondition(v)
	if reason == sunkv1.ReasonBackupInCharge && !hadReason(sc, sunkv1.ConditionControllerReady, sunkv1.ReasonBackupInCharge) {
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonBackupInCharge, msg)
	}
	st.set(sunkv1.ConditionControllerReady, ok, reason, msg)
	if !v.PrimaryReady && v.HasBackup {
		return pollWhileFailingOver, nil
	}
	return 0, nil
}

// whoServes asks Slurm through slurmrestd whether the primary answers a ping, and whether a
// controller in charge answers a statistics request (a backup in standby answers pings but
// refuses everything else, ESLURM_IN_STANDBY_MODE).
func (r *Reconciler) whoServes(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, keys slurmconn.Keys) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, serveTimeout)
	defer cancel()
	sl, err := r.slurmFor(ctx, sc, n, keys)
	if err != nil {
		return false, err
	}
	if _, err := sl.Diag(ctx); err != nil {
		return false, err
	}
	pings, err := sl.Ping(ctx)
	if err != nil {
		return false, err
	}
	return primaryResponds(pings), nil
}

// primaryResponds reads the primary's entry of a ping (Slurm marks the first SlurmctldHost).
func primaryResponds(pings []slurm.ControllerPing) bool {
	for _, p := range pings {
		if p.Primary {
			return p.Responding
		}
	}
	return false
}

// hadReason: the status as last written has condition typ with reason.
func hadReason(sc *sunkv1.SlurmCluster, typ, reason string) bool {
	c := meta.FindStatusCondition(sc.Status.Conditions, typ)
	return c != nil && c.Reason == reason
}
