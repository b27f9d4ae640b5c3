//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestJWTKeyRotation rotates a cluster's JWT key the documented way (docs/security.md,
// "Rotating keys": the new key in jwt.key, the old one in jwt.key.previous, one Secret
// update) under a running job, with the operator and the syncer running: slurmctld comes to
// accept the new key and refuse the old one without a restart, the operator drops the old key,
// the running job completes, a new job runs, and the syncer still reads Slurm (it reports the
// compute pod idle once the job is over) without having been restarted.
func TestJWTKeyRotation(t *testing.T) {
	e := startOperator(t)
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "rot"},
		Spec:       sunkv1.SlurmClusterSpec{Image: slurmImage, ImagePullPolicy: corev1.PullNever},
	})
	n := render.NamesFor(e.cluster(t, "rot"), "")
	login := e.podOf(t, "rot", wellknown.ComponentLogin).Name
	ctldBefore := e.podOf(t, "rot", wellknown.ComponentController)
	e.createReplicas(t, "rot", "cpu", 1)
	e.waitIdle(t, login, 4*time.Minute, "cpu-0 idle", "cpu-0")
	running := e.sbatch(t, login, "--chdir=/tmp --output=/dev/null --wrap 'sleep 120'")
	e.waitSlurmState(t, "cpu-0", "the syncer sees cpu-0 busy before the rotation", func(s string) bool { return s != "" && !strings.EqualFold(s, "idle") })

	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.JWTSecret}, secret); err != nil {
		t.Fatal(err)
	}
	oldKey := secret.Data[render.JWTKeyName]
	newKey := make([]byte, 64)
	if _, err := rand.Read(newKey); err != nil {
		t.Fatal(err)
	}
	probe := slurmconn.New(slurmconn.Options{Reader: e.c})
	if err := probe.Probe(ctx, n, "", oldKey); err != nil {
		t.Fatalf("before the rotation slurmctld refuses its own key: %v", err)
	}
	e.update(t, secret, func() {
		secret.Data[render.JWTKeyName], secret.Data[render.JWTPreviousKeyName] = newKey, oldKey
	})
	rotated := time.Now()

	poll(t, 3*time.Minute, "slurmctld accepts the new key and the operator drops the old one", func() error {
		s := &corev1.Secret{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.JWTSecret}, s); err != nil {
			return err
		}
		if _, ok := s.Data[render.JWTPreviousKeyName]; ok {
			return fmt.Errorf("%s still holds %s", n.JWTSecret, render.JWTPreviousKeyName)
		}
		return nil
	})
	t.Logf("rotation done %s after the Secret update", time.Since(rotated).Round(time.Second))
	if err := probe.Probe(ctx, n, "", newKey); err != nil {
		t.Errorf("slurmctld refuses the new key: %v", err)
	}
	if err := probe.Probe(ctx, n, "", oldKey); !errors.Is(err, slurm.ErrUnauthorized) {
		t.Errorf("slurmctld and the old key: %v, want a refusal", err)
	}
	if out, err := e.sh(t, login, "login", "squeue -h -j "+running+" -o %T"); err != nil || strings.TrimSpace(out) != "RUNNING" {
		t.Fatalf("job %s after the rotation: %q %v, want RUNNING (the job must span the rotation)", running, out, err)
	}
	if ctld := e.podOf(t, "rot", wellknown.ComponentController); ctld.UID != ctldBefore.UID || restarts(ctld) != restarts(ctldBefore) {
		t.Errorf("slurmctld's pod was replaced or restarted by the rotation")
	}

	if state, exit, _ := e.jobEnd(t, login, running, 3*time.Minute); state != "COMPLETED" {
		t.Fatalf("job %s that ran across the rotation: %s (exit %s)", running, state, exit)
	}
	id := strings.TrimSpace(e.mustSh(t, login, "login", "sbatch --parsable --chdir=/tmp --output=/dev/null --wrap true"))
	if state, exit, _ := e.jobEnd(t, login, id, 3*time.Minute); state != "COMPLETED" {
		t.Fatalf("a job after the rotation: %s (exit %s)", state, exit)
	}
	// The syncer (this process's, never restarted) saw the job end: it reads Slurm with the
	// new key. It showed the pod busy before the rotation; idle now is a read made after it.
	e.waitSlurmState(t, "cpu-0", "the syncer sees cpu-0 idle after the rotation", func(s string) bool { return strings.EqualFold(s, "idle") })
	if c := meta.FindStatusCondition(e.cluster(t, "rot").Status.Conditions, sunkv1.ConditionNodesSynced); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("NodesSynced after the rotation: %+v", c)
	}
}

func restarts(p corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// waitSlurmState waits until the Slurm state the syncer wrote on a compute pod satisfies ok.
func (e *operatorEnv) waitSlurmState(t *testing.T, pod, what string, ok func(string) bool) {
	t.Helper()
	poll(t, 2*time.Minute, what, func() error {
		p := &corev1.Pod{}
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: pod}, p); err != nil {
			return err
		}
		if got := p.Annotations[wellknown.AnnotationSlurmState]; !ok(got) {
			return fmt.Errorf("%s says %s=%q", pod, wellknown.AnnotationSlurmState, got)
		}
		return nil
	})
}

// mustSh runs a script in a pod's container and fails the test on an error.
func (e *operatorEnv) mustSh(t *testing.T, pod, container, script string) string {
	t.Helper()
	out, err := e.sh(t, pod, container, script)
	if err != nil {
		t.Fatalf("%s/%s: %s: %v\n%s", pod, container, script, err, out)
	}
	return strings.TrimSpace(out)
}
