//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// Lines logged when control changes hands: the backup's slurmctld taking over, the same in 24.11
// and 26.05 (src/slurmctld/backup.c run_backup), and the returning primary's entrypoint once
// the backup has saved its state and stopped (sunk-entrypoint, await_backup_in_charge).
const (
	logTakingOver = "taking over"
	logHandedBack = "the backup saved its state and stopped"
)

// TestControllerFailover kills the primary slurmctld of a cluster with a backup while a job
// runs: the backup takes over on the shared state volume, the running job ends COMPLETED, a new
// job runs, and sunk-syncer, which reads Slurm through slurmrestd, follows the backup. When the
// primary's pod returns, control goes back to it, the backup is back in standby (on 26.05 that
// needs conmgr_quiesce_timeout, docs/slurmcluster.md "Controller failover"), and the job
// running across that ends COMPLETED too.
//
// The primary is killed the way a lost node kills it: at once (grace 0, no state saved on
// SIGTERM), and it does not come back, because Kubernetes replaces a StatefulSet pod of an
// unreachable node only once that pod is deleted for good. A pod deleted on a healthy node
// is recreated within seconds, and its slurmctld takes control itself before the backup's
// SlurmctldTimeout passes: no failover happens. On this one-node cluster a ResourceQuota of
// the test's namespace holds the replacement back instead, the way the lost node would.
func TestControllerFailover(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()
	const name = "fo"
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever,
			Controller: sunkv1.ControllerSpec{Backup: true}},
	})
	n := clusternames.For(e.cluster(t, name), "")
	primary, backup := n.ControllerPod(0), n.ControllerPod(1)
	login := e.podOf(t, name, wellknown.ComponentLogin).Name
	e.createReplicas(t, name, "cpu", 1)
	e.waitIdle(t, login, 3*time.Minute, "cpu-0 idle", "cpu-0")
	// Ready needs the primary alone (ControllerReady: some slurmctld serves), so the backup may
	// still be starting: on a quiet machine the cluster was Ready and cpu-0 idle 16 s before the
	// backup's slurmctld had even started.
	poll(t, 3*time.Minute, "scontrol ping: both slurmctlds UP before the failover", func() error {
		out, err := e.sh(t, login, "login", "scontrol ping")
		if err != nil || !strings.Contains(out, "Slurmctld(primary) at "+primary+" is UP") || !strings.Contains(out, "Slurmctld(backup) at "+backup+" is UP") {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})

	// A job that outlives the takeover.
	running := e.sbatchHeld(t, login, "-w cpu-0 -J across-failover")
	e.holdBackPods(t)
	killed := time.Now()
	if err := e.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: primary}},
		client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	// Until the backup takes over, nothing serves, and the SlurmCluster says so.
	e.waitControllerReason(t, name, 30*time.Second, metav1.ConditionFalse, sunkv1.ReasonPrimaryDown, metav1.ConditionFalse)

	// The backup serves: an RPC that a standby controller refuses is answered.
	var served time.Duration
	poll(t, 2*time.Minute, "the backup serves squeue", func() error {
		out, err := e.sh(t, login, "login", "squeue -h -j "+running+" -o %T")
		if err != nil || strings.TrimSpace(out) != "RUNNING" {
			return fmt.Errorf("squeue: %v %q", err, out)
		}
		served = time.Since(killed)
		return nil
	})
	took := e.logTime(t, backup, logTakingOver)
	t.Logf("primary killed → backup took over %s later (its log), squeue answered %s later; SlurmctldTimeout=%d",
		took.Sub(killed).Round(time.Second), served.Round(time.Second), render.SlurmctldTimeout)
	// The backup pings the primary every SlurmctldTimeout/3 and takes over when the last answer
	// and the last heartbeat on the state volume are older than SlurmctldTimeout. A ping of the
	// vanished primary can wait out MessageTimeout (10 s) before the next one starts: 60 s was
	// seen with two other e2e clusters beside this one on 2 cores.
	if bound := time.Duration(2*render.SlurmctldTimeout+10) * time.Second; took.Sub(killed) > bound {
		t.Errorf("the backup took over %s after the kill, beyond %s", took.Sub(killed).Round(time.Second), bound)
	}
	// The SlurmCluster is Ready again, with the reason an operator must see: the spare is in use.
	e.waitControllerReason(t, name, time.Minute, metav1.ConditionTrue, sunkv1.ReasonBackupInCharge, metav1.ConditionTrue)
	out, err := e.sh(t, login, "login", "scontrol ping")
	if err != nil || !strings.Contains(out, "Slurmctld(primary) at "+primary+" is DOWN") || !strings.Contains(out, "Slurmctld(backup) at "+backup+" is UP") {
		t.Errorf("scontrol ping under the backup: %v\n%s", err, out)
	}

	// The job running across the failover completes. sunk-syncer reads Slurm through
	// slurmrestd, which now reaches the backup: the node's state on its pod follows the job's
	// end under the backup, and NodesSynced is true.
	e.release(t, login, running)
	if state, exit, _ := e.jobEnd(t, login, running, 2*time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job running across the failover ended %s (exit %s)", state, exit)
	}
	poll(t, time.Minute, "sunk-syncer mirrors cpu-0 idle under the backup", func() error {
		p := &corev1.Pod{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "cpu-0"}, p); err != nil {
			return err
		}
		if st := p.Annotations[wellknown.AnnotationSlurmState]; !strings.HasPrefix(st, "idle") {
			return fmt.Errorf("pod annotation %s=%q", wellknown.AnnotationSlurmState, st)
		}
		if c := meta.FindStatusCondition(e.cluster(t, name).Status.Conditions, sunkv1.ConditionNodesSynced); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("NodesSynced %+v", c)
		}
		return nil
	})
	// A new submission runs under the backup, and across the primary's return.
	next := e.sbatchHeld(t, login, "-w cpu-0 -J across-return")

	// The primary returns and takes control back; the job submitted under the backup completes.
	released := time.Now()
	e.releasePods(t, n.Controller)
	poll(t, 3*time.Minute, "the backup hands control back", func() error {
		if err := e.logHas(primary, logHandedBack); err != nil {
			return err
		}
		// The backup back in standby answers pings again, ready for the next failover.
		out, err := e.sh(t, login, "login", "scontrol ping && squeue -h -j "+next+" -o %T")
		if err != nil || !strings.Contains(out, "Slurmctld(primary) at "+primary+" is UP") ||
			!strings.Contains(out, "Slurmctld(backup) at "+backup+" is UP") || strings.TrimSpace(out) == "" {
			return fmt.Errorf("scontrol ping && squeue: %v %q", err, out)
		}
		return nil
	})
	e.waitControllerReason(t, name, time.Minute, metav1.ConditionTrue, sunkv1.ReasonReady, metav1.ConditionTrue)
	started := e.containerStart(t, primary)
	handed := e.logTime(t, primary, logHandedBack)
	t.Logf("primary released %s after the kill; control back %s after the release (its slurmctld started %s after the release)",
		released.Sub(killed).Round(time.Second), handed.Sub(released).Round(time.Second), started.Sub(released).Round(time.Second))
	e.release(t, login, next)
	if state, exit, _ := e.jobEnd(t, login, next, 2*time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job running across the primary's return ended %s (exit %s)", state, exit)
	}
	if out, err := e.sh(t, login, "login", testenv.AsUser("sbatch --parsable -w cpu-0 -J after --wrap true")); err != nil {
		t.Fatalf("sbatch under the returned primary: %v\n%s", err, out)
	} else if state, exit, _ := e.jobEnd(t, login, strings.TrimSpace(out), time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("a job under the returned primary ended %s (exit %s)", state, exit)
	}
}

// waitControllerReason waits until the SlurmCluster's ControllerReady has status ctld and
// reason, and Ready has status ready with the same reason (PrimaryDown is only
// ControllerReady's: Ready then names the conditions that are not true).
func (e *operatorEnv) waitControllerReason(t *testing.T, name string, within time.Duration, ctld metav1.ConditionStatus, reason string, ready metav1.ConditionStatus) {
	t.Helper()
	start := time.Now()
	poll(t, within, "ControllerReady="+string(ctld)+" "+reason, func() error {
		conds := e.cluster(t, name).Status.Conditions
		c, r := meta.FindStatusCondition(conds, sunkv1.ConditionControllerReady), meta.FindStatusCondition(conds, sunkv1.ConditionReady)
		if c == nil || r == nil || c.Status != ctld || c.Reason != reason || r.Status != ready ||
			(ready == metav1.ConditionTrue && r.Reason != reason) {
			return fmt.Errorf("ControllerReady %+v, Ready %+v", c, r)
		}
		t.Logf("%s after %s: ControllerReady=%s %s %q; Ready=%s %s", name, time.Since(start).Round(time.Second), c.Status, c.Reason, c.Message, r.Status, r.Reason)
		return nil
	})
}

// holdBackPods stops new pods in the test's namespace with a ResourceQuota of one pod fewer than
// there are: a deleted pod is not replaced until releasePods.
func (e *operatorEnv) holdBackPods(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "hold-back"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(pods.Items)-1), resource.DecimalSI)}}}
	if err := e.c.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	// Quota admission refuses every pod until the quota controller has counted the pods; a
	// quota whose usage is known refuses only the pods beyond it.
	poll(t, time.Minute, "the quota counts the pods", func() error {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return err
		}
		if _, ok := q.Status.Used[corev1.ResourcePods]; !ok {
			return fmt.Errorf("quota status %+v", q.Status)
		}
		return nil
	})
}

// releasePods removes holdBackPods' quota and touches the StatefulSet sts: its controller
// retried the held-back pod with a growing back-off and would otherwise wait it out.
func (e *operatorEnv) releasePods(t *testing.T, sts string) {
	t.Helper()
	ctx := context.Background()
	if err := e.c.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "hold-back"}}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"e2e.sunk.dev/released":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if err := e.c.Patch(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: sts}},
		client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// logLine returns the time kubelet stamped on the first line of a slurmctld container's log
// that contains s; an error when the log cannot be read (the pod is not there yet).
func (e *operatorEnv) logLine(pod, s string) (time.Time, bool, error) {
	raw, err := e.Clientset.CoreV1().Pods(e.ns).GetLogs(pod, &corev1.PodLogOptions{
		Container: render.ControllerContainer, Timestamps: true}).DoRaw(context.Background())
	if err != nil {
		return time.Time{}, false, fmt.Errorf("logs of %s: %w", pod, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if ts, line, ok := strings.Cut(sc.Text(), " "); ok && strings.Contains(line, s) {
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				return time.Time{}, false, fmt.Errorf("log line of %s without a timestamp: %q", pod, sc.Text())
			}
			return at, true, nil
		}
	}
	return time.Time{}, false, nil
}

// logHas is nil once pod's slurmctld log has a line with s, for poll.
func (e *operatorEnv) logHas(pod, s string) error {
	if _, ok, err := e.logLine(pod, s); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("no %q in %s's log yet", s, pod))
	}
	return nil
}

func (e *operatorEnv) logTime(t *testing.T, pod, s string) time.Time {
	t.Helper()
	at, ok, err := e.logLine(pod, s)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("no %q in %s's slurmctld log", s, pod)
	}
	return at
}

// containerStart is when pod's slurmctld container started.
func (e *operatorEnv) containerStart(t *testing.T, pod string) time.Time {
	t.Helper()
	p := &corev1.Pod{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: pod}, p); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == render.ControllerContainer && c.State.Running != nil {
			return c.State.Running.StartedAt.Time
		}
	}
	t.Fatalf("%s's slurmctld is not running: %+v", pod, p.Status.ContainerStatuses)
	return time.Time{}
}
