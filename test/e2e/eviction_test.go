//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// TestKubectlDrainWaitsForTheJob runs the real `kubectl drain` on the node of a NodeSet whose
// compute pod runs a job: the idle pod is evicted once the cordon's drain reached Slurm, the
// busy one only after its job completed, and the job ends COMPLETED. Before that, the real
// `kubectl sunk` shows the nodes and a job, and drains and resumes them (checkKubectlSunk).
func TestKubectlDrainWaitsForTheJob(t *testing.T) {
	e := startOperator(t)
	ctx := context.Background()
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "evc"},
		Spec:       sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever},
	})
	login := e.podOf(t, "evc", wellknown.ComponentLogin).Name
	e.createReplicas(t, "evc", "cpu", 2)
	e.waitIdle(t, login, 4*time.Minute, "cpu-0 and cpu-1 idle", "cpu-0", "cpu-1")
	pdb := &policyv1.PodDisruptionBudget{}
	poll(t, time.Minute, "the NodeSet's disruption budget", func() error {
		return e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "cpu-slurm-jobs"}, pdb)
	})

	// kubectl sunk (the real binary) first: the nodes and the job as it shows them, and its
	// drain and resume.
	k := e.kubectlSunk(t)
	e.checkKubectlSunk(t, k, login, e.sbatchHeld(t, login, "-w cpu-1 -J short"))

	job := e.sbatchHeld(t, login, "-w cpu-1 -J busy")
	idleBefore := e.memberPods(t, "cpu")["cpu-0"]

	// The node is shared with every other test: it is uncordoned whatever happens.
	t.Cleanup(func() { e.cordon(t, false, "") })
	drain := exec.Command(filepath.Join(testenv.CacheDir(), "bin", "kubectl"), "drain", e.NodeName,
		"--pod-selector", wellknown.LabelCluster+"=evc,"+wellknown.LabelNodeSet+"=cpu",
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
	drain.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	var out bytes.Buffer
	drain.Stdout, drain.Stderr = &out, &out
	start := time.Now()
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- drain.Wait() }()

	// The idle pod goes as soon as Slurm has it drained, while the job still runs.
	poll(t, 2*time.Minute, "the idle pod cpu-0 evicted", func() error {
		var p corev1.Pod
		err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "cpu-0"}, &p)
		if err == nil && p.UID == idleBefore.UID && p.DeletionTimestamp.IsZero() {
			return fmt.Errorf("cpu-0 still there")
		}
		return nil
	})
	idleGone := time.Since(start)
	if out, err := e.sh(t, login, "login", "squeue -h -j "+job+" -o %T"); err != nil || strings.TrimSpace(out) != "RUNNING" {
		t.Fatalf("the job is %q (%v) when the idle pod was evicted, want RUNNING", out, err)
	}
	select {
	case derr := <-drained:
		t.Fatalf("kubectl drain ended (%v) while the busy pod's job runs:\n%s", derr, out.String())
	default:
	}
	e.release(t, login, job)

	var derr error
	select {
	case derr = <-drained:
	case <-time.After(5 * time.Minute):
		_ = drain.Process.Kill()
		t.Fatalf("kubectl drain did not end:\n%s", out.String())
	}
	drainEnd := time.Now()
	if derr != nil {
		t.Fatalf("kubectl drain: %v\n%s", derr, out.String())
	}
	state, exit, end := e.jobEnd(t, login, job, time.Minute)
	if state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job ended %s with exit %s: the drain killed it\n%s", state, exit, out.String())
	}
	if drainEnd.Before(end) {
		t.Errorf("kubectl drain ended at %v, before the job ended at %v", drainEnd, end)
	}
	if !strings.Contains(out.String(), "disruption budget") {
		t.Errorf("kubectl drain never said why it waited:\n%s", out.String())
	}
	t.Logf("kubectl drain: idle pod evicted after %s, busy pod after its job (%s in all)",
		idleGone.Round(time.Second), drainEnd.Sub(start).Round(time.Second))

	e.cordon(t, false, "")
	e.waitIdle(t, login, 4*time.Minute, "cpu-0 and cpu-1 idle again after the uncordon", "cpu-0", "cpu-1")
}
