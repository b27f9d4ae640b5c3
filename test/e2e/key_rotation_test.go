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
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// TestJWTKeyRotation rotates a cluster's JWT key the documented way (docs/security.md,
// "Rotating keys": the new key in jwt.key, the old one in jwt.key.previous, one Secret
// update) under a running job, with the operator and the syncer running: slurmctld comes to
// accept the new key and refuse the old one without a restart, the operator drops the old key,
// the running job completes, a new job runs, and the syncer still reads Slurm (it reports the
// compute pod idle once the job is over) without having been restarted.
func TestJWTKeyRotation(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	b := e.rotationBed(t, "rot", sunkv1.SlurmClusterSpec{})
	n, login, running := b.names, b.login, b.running

	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.JWTSecret}, secret); err != nil {
		t.Fatal(err)
	}
	oldKey := secret.Data[wellknown.SecretJWTKey]
	newKey := make([]byte, 64)
	if _, err := rand.Read(newKey); err != nil {
		t.Fatal(err)
	}
	probe := slurmconn.New(slurmconn.Options{Reader: e.c})
	if err := probe.Probe(ctx, n, "", oldKey); err != nil {
		t.Fatalf("before the rotation slurmctld refuses its own key: %v", err)
	}
	e.update(t, secret, func() {
		secret.Data[wellknown.SecretJWTKey], secret.Data[wellknown.SecretJWTPreviousKey] = newKey, oldKey
	})
	rotated := time.Now()

	poll(t, 3*time.Minute, "slurmctld accepts the new key and the operator drops the old one", func() error {
		s := &corev1.Secret{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.JWTSecret}, s); err != nil {
			return err
		}
		if _, ok := s.Data[wellknown.SecretJWTPreviousKey]; ok {
			return fmt.Errorf("%s still holds %s", n.JWTSecret, wellknown.SecretJWTPreviousKey)
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
	e.release(t, login, running)

	if state, exit, _ := e.jobEnd(t, login, running, 3*time.Minute); state != "COMPLETED" {
		t.Fatalf("job %s that ran across the rotation: %s (exit %s)", running, state, exit)
	}
	b.afterRotation(t)
	e.loginHoldsNoKey(t, b.cluster)
}

// rotationBed is a cluster for a key rotation: one compute pod, cpu-0, running a job.
type rotationBed struct {
	e              *operatorEnv
	cluster, login string
	names          clusternames.Names
	running        string // the job started before the rotation
	before         map[string]corev1.Pod
}

// rotationJobArgs are a rotation bed's jobs' sbatch arguments: a little memory each, so that two
// fit on cpu-0 (without --mem a job holds the whole node's: CR_Core_Memory, no DefMemPerCPU).
const rotationJobArgs = "--chdir=/tmp --output=/dev/null --mem=32M"

// rotationBed makes a cluster of the spec (image set here), a NodeSet of one compute pod of two
// CPUs (the machine's: two held jobs fit), and a held job on it (heldScript: it runs until the
// test releases it), seen busy by the syncer.
func (e *operatorEnv) rotationBed(t *testing.T, name string, spec sunkv1.SlurmClusterSpec) *rotationBed {
	t.Helper()
	spec.SlurmVersion, spec.Image, spec.ImagePullPolicy = testSlurmVersion, slurmImage, corev1.PullNever
	e.createReady(t, &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: spec})
	b := &rotationBed{e: e, cluster: name, names: clusternames.For(e.cluster(t, name), ""),
		login: e.podOf(t, name, wellknown.ComponentLogin).Name, before: map[string]corev1.Pod{}}
	e.createReplicasWith(t, name, "cpu", 1, func(s *sunkv1.NodeSetSpec) { s.ExtraConf = "CPUs=2" })
	e.waitIdle(t, b.login, 4*time.Minute, "cpu-0 idle", "cpu-0")
	for _, c := range []string{wellknown.ComponentController, wellknown.ComponentCompute} {
		b.before[c] = e.podOf(t, name, c)
	}
	b.running = e.sbatchHeld(t, b.login, rotationJobArgs)
	e.waitSlurmState(t, "cpu-0", "the syncer sees cpu-0 busy before the rotation", func(s string) bool { return s != "" && !strings.EqualFold(s, "idle") })
	return b
}

// afterRotation: a new job submitted in the login pod completes, the syncer (this process's,
// never restarted) reads Slurm (it saw the pod busy before the rotation; idle now is a read
// made after it), and neither slurmctld's pod nor the compute pod was replaced or restarted.
func (b *rotationBed) afterRotation(t *testing.T) {
	t.Helper()
	e := b.e
	id := strings.TrimSpace(e.mustSh(t, b.login, "login", testenv.AsUser("sbatch --parsable --chdir=/tmp --output=/dev/null --wrap true")))
	if state, exit, _ := e.jobEnd(t, b.login, id, 3*time.Minute); state != "COMPLETED" {
		t.Fatalf("a job after the rotation: %s (exit %s)", state, exit)
	}
	e.waitSlurmState(t, "cpu-0", "the syncer sees cpu-0 idle after the rotation", func(s string) bool { return strings.EqualFold(s, "idle") })
	if c := meta.FindStatusCondition(e.cluster(t, b.cluster).Status.Conditions, sunkv1.ConditionNodesSynced); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("NodesSynced after the rotation: %+v", c)
	}
	for c, before := range b.before {
		if p := e.podOf(t, b.cluster, c); p.UID != before.UID || restarts(p) != restarts(before) {
			t.Errorf("the %s pod was replaced or restarted by the rotation", c)
		}
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
func (e *operatorEnv) mustSh(t testing.TB, pod, container, script string) string {
	t.Helper()
	out, err := e.sh(t, pod, container, script)
	if err != nil {
		t.Fatalf("%s/%s: %s: %v\n%s", pod, container, script, err, out)
	}
	return strings.TrimSpace(out)
}
