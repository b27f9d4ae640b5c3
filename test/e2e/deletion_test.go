//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// TestDeletingANodeSetWaitsForItsJobs deletes a NodeSet whose node runs a job: the idle pod
// goes at once, the busy one after the job, which ends COMPLETED, and then the NodeSet. A
// second NodeSet is deleted with the force annotation while its job runs: it goes at once.
func TestDeletingANodeSetWaitsForItsJobs(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "del"},
		Spec:       sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever},
	})
	login := e.podOf(t, "del", wellknown.ComponentLogin).Name
	cpu, tmp := e.createReplicas(t, "del", "cpu", 2), e.createReplicas(t, "del", "tmp", 1)
	e.waitIdle(t, login, 4*time.Minute, "cpu-0, cpu-1 and tmp-0 idle", "cpu-0", "cpu-1", "tmp-0")
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(cpu), cpu); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(cpu.Finalizers, ","), wellknown.FinalizerNodeSetDrain) {
		t.Fatalf("NodeSet cpu has finalizers %v, want %s", cpu.Finalizers, wellknown.FinalizerNodeSetDrain)
	}

	job := e.sbatchHeld(t, login, "-w cpu-1 -J busy")
	forced := e.sbatch(t, login, "-w tmp-0 -J forced --wrap 'sleep 600'")
	start := time.Now()
	if err := e.c.Delete(ctx, cpu); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, tmp); err != nil {
		t.Fatal(err)
	}

	// The idle node goes while the job runs; the NodeSet says what it waits for.
	poll(t, 2*time.Minute, "cpu-0 gone from Slurm, cpu waiting for the job", func() error {
		nodes, err := e.slurmNodes(t, login)
		if err != nil {
			return err
		}
		if _, ok := nodes["cpu-0"]; ok {
			return fmt.Errorf("sinfo: %v", nodes)
		}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(cpu), cpu); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cpu.Status.Conditions, sunkv1.ConditionReady); c == nil || c.Reason != sunkv1.ReasonWaitingForJobs {
			return fmt.Errorf("NodeSet cpu conditions %+v, want Ready reason %s", cpu.Status.Conditions, sunkv1.ReasonWaitingForJobs)
		}
		return nil
	})
	if out, err := e.sh(t, login, "login", "squeue -h -j "+job+" -o %T"); err != nil || strings.TrimSpace(out) != "RUNNING" {
		t.Fatalf("the job is %q (%v) while the NodeSet waits, want RUNNING", out, err)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(tmp), tmp); err != nil {
		t.Fatalf("NodeSet tmp went without the force annotation while its job ran: %v", err)
	}
	e.release(t, login, job)

	var gone time.Time
	poll(t, 3*time.Minute, "NodeSet cpu gone", func() error {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(cpu), &sunkv1.NodeSet{})
		if apierrors.IsNotFound(err) {
			gone = time.Now()
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	state, exit, end := e.jobEnd(t, login, job, time.Minute)
	if state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job ended %s with exit %s: the deletion killed it", state, exit)
	}
	if gone.Before(end) {
		t.Errorf("NodeSet cpu was gone at %v, before its job ended at %v", gone, end)
	}
	poll(t, 2*time.Minute, "cpu's pods and Slurm nodes gone", func() error {
		if pods := e.memberPods(t, "cpu"); len(pods) > 0 {
			return fmt.Errorf("pods left: %d", len(pods))
		}
		nodes, err := e.slurmNodes(t, login)
		if err != nil || nodes["cpu-1"] != "" {
			return fmt.Errorf("sinfo: %v %v", nodes, err)
		}
		return nil
	})
	t.Logf("kubectl delete nodeset with a 40 s job: NodeSet gone %s after the deletion", gone.Sub(start).Round(time.Second))

	// The way out: the force annotation lets tmp go with its job still running.
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, wellknown.AnnotationForceDelete))
	if err := e.c.Patch(ctx, tmp, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "NodeSet tmp gone after the force annotation", func() error {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(tmp), &sunkv1.NodeSet{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	if out, err := e.sh(t, login, "login", "scontrol -o show job "+forced); err != nil || strings.Contains(out, "JobState=COMPLETED") {
		t.Errorf("the forced NodeSet's job: %v %s (its 600 s job cannot have completed)", err, out)
	}
}

// TestDeletingASlurmClusterWaitsForItsJobs deletes a SlurmCluster whose node runs a job: the
// cluster deletes its NodeSet and stays, slurmctld with it, until the job has ended COMPLETED
// and the pods are gone. Its keys, saved state and accounting database outlive it: the cluster
// created again under the same name has the same key, goes on numbering jobs where the old one
// stopped, sacct still lists the old job, and a compute pod joins it with the retained key.
func TestDeletingASlurmClusterWaitsForItsJobs(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()
	newCluster := func() *sunkv1.SlurmCluster {
		return &sunkv1.SlurmCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gone"},
			Spec: sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever,
				Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}},
		}
	}
	e.createReady(t, newCluster())
	login := e.podOf(t, "gone", wellknown.ComponentLogin).Name
	ns := e.createReplicas(t, "gone", "work", 1)
	e.waitIdle(t, login, 4*time.Minute, "work-0 idle", "work-0")
	key := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "gone-auth-key"}, key); err != nil {
		t.Fatal(err)
	}

	job := e.sbatchHeld(t, login, "-w work-0 -J busy")
	sc := &sunkv1.SlurmCluster{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "gone"}, sc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, sc); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "the NodeSet deleted, the cluster held", func() error {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			return err
		}
		if ns.DeletionTimestamp.IsZero() {
			return fmt.Errorf("NodeSet work not deleted")
		}
		return e.c.Get(ctx, client.ObjectKeyFromObject(sc), sc)
	})
	if out, err := e.sh(t, login, "login", "squeue -h -j "+job+" -o %T"); err != nil || strings.TrimSpace(out) != "RUNNING" {
		t.Fatalf("the job is %q (%v) while the cluster is being deleted, want RUNNING", out, err)
	}
	// Once the job ends, the deletion goes on and takes the login pod with the cluster: how the
	// job ended is read from accounting, which outlives it, after the re-creation below.
	e.release(t, login, job)
	poll(t, 3*time.Minute, "the NodeSet and the cluster gone", func() error {
		for _, o := range []client.Object{&sunkv1.NodeSet{ObjectMeta: ns.ObjectMeta}, &sunkv1.SlurmCluster{ObjectMeta: sc.ObjectMeta}} {
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there (%v)", o, o.GetName(), err)
			}
		}
		return nil
	})

	// Created again: the retained key and state claim are taken up.
	e.createReady(t, newCluster())
	again := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "gone-auth-key"}, again); err != nil {
		t.Fatal(err)
	}
	if again.UID != key.UID || string(again.Data[render.AuthKeyName]) != string(key.Data[render.AuthKeyName]) {
		t.Errorf("the auth key was replaced across the delete (uid %s -> %s)", key.UID, again.UID)
	}
	login = e.podOf(t, "gone", wellknown.ComponentLogin).Name
	out, err := e.sh(t, login, "login", testenv.AsUser("sbatch --parsable --hold --wrap true"))
	if err != nil {
		t.Fatalf("sbatch after re-creation: %v\n%s", err, out)
	}
	if next, old := atoi(t, out), atoi(t, job); next <= old {
		t.Errorf("the re-created cluster numbered a job %d after the old cluster's %d: its saved state was lost", next, old)
	}
	// Ended by its own exit, not killed by the deletion (that would be CANCELLED or NODE_FAIL).
	e.waitSacct(t, login, "sacct -n -X -P -j "+job+" -o JobID,JobName,State,ExitCode", job+"|busy|COMPLETED|0:0")
	// A compute pod joins with the key it is given, the retained one: slurmctld would not
	// register a node whose key it does not share.
	e.createReplicas(t, "gone", "work", 1)
	e.waitIdle(t, login, 4*time.Minute, "work-0 idle in the re-created cluster", "work-0")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a job id: %q", s)
	}
	return n
}
