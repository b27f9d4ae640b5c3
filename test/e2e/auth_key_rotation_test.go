//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"sunk.dev/sunk/pkg/wellknown"
)

// TestAuthKeyRotation rotates the auth key of a cluster with accounting the documented way
// (docs/security.md, "Rotating keys": the admin names the new key id on the SlurmCluster) under
// two running jobs. The operator turns slurm.key into a ring and drives the three rounds; the
// jobs run across rounds 0 and 1, the new key becomes the default only after they ended (their
// slurmstepds sign with slurm.key): the first completes; the second, which would run for ever,
// is requeued once the admin sets a deadline (sunk.dev/auth-key-deadline); a new job runs from the login pod
// afterwards (sackd signs with the new key, then the only one), the syncer still reads Slurm,
// no pod was restarted but slurmdbd's, and no Slurm daemon refused a credential for its key on the way.
func TestAuthKeyRotation(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	b := e.rotationBed(t, "arot", sunkv1.SlurmClusterSpec{Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}})
	n, login, running := b.names, b.login, b.running

	ctx := context.Background()
	secret := func() *corev1.Secret {
		s := &corev1.Secret{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: n.AuthSecret}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A second job from before the rotation, which never ends by itself (--time=UNLIMITED in
	// effect): only the deadline lets the rotation go on past it.
	forever := e.sbatchHeld(t, login, rotationJobArgs+" -J forever")
	t.Cleanup(func() { _, _ = e.sh(t, login, "login", "scancel "+forever) })
	if _, ok := secret().Data[render.AuthRingName]; ok {
		t.Fatalf("a new cluster's Secret already has %s: the upgrade path (round 0) would go untested", render.AuthRingName)
	}
	sc := e.cluster(t, "arot")
	e.update(t, sc, func() { metav1.SetMetaDataAnnotation(&sc.ObjectMeta, wellknown.AnnotationAuthKeyID, "k2") })
	asked := time.Now()

	// ring reads the Secret's ring and whether the operator recorded it loaded everywhere.
	ring := func() (*render.AuthRing, bool, error) {
		s := secret()
		b := s.Data[render.AuthRingName]
		if b == nil {
			return nil, false, fmt.Errorf("no %s yet", render.AuthRingName)
		}
		r, err := render.ParseAuthRing(b)
		if err != nil {
			return nil, false, err
		}
		sum := sha256.Sum256(b)
		loaded := strings.HasPrefix(s.Annotations[wellknown.AnnotationAuthRingLoaded], hex.EncodeToString(sum[:])[:16]+"@")
		return r, loaded, nil
	}
	poll(t, 4*time.Minute, "round 1 (k2 added, not the default) loaded by every daemon", func() error {
		r, loaded, err := ring()
		if err != nil {
			return err
		}
		if !r.Has("k2") || !loaded {
			return fmt.Errorf("ring of %d keys, default %s, loaded %v; condition %+v", len(r.Keys), r.Default(), loaded,
				meta.FindStatusCondition(e.cluster(t, "arot").Status.Conditions, sunkv1.ConditionAuthKeyRotated))
		}
		return nil
	})
	t.Logf("round 1 loaded %s after the request", time.Since(asked).Round(time.Second))
	// The job's slurmstepd read slurm.key at its start and signs its completion with it, without
	// a kid: k2 may become the default (what such a token is checked against) only after it ended.
	// The job is held until the operator says it waits for it, past the tokens' lifetime.
	waitsFor := func(jobs int) {
		t.Helper()
		want := fmt.Sprintf("once the %d job(s) that started before end", jobs)
		poll(t, 4*time.Minute, "the operator waits for "+want+" before k2 becomes the default", func() error {
			c := meta.FindStatusCondition(e.cluster(t, "arot").Status.Conditions, sunkv1.ConditionAuthKeyRotated)
			if c == nil || !strings.Contains(c.Message, want) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		if r, _, err := ring(); err != nil || r.Default() != "initial" {
			t.Fatalf("the ring's default while %d job(s), whose slurmstepds sign with the old key, run: %v %v; want initial", jobs, r, err)
		}
	}
	waitsFor(2)
	if out, err := e.sh(t, login, "login", "squeue -h -j "+running+","+forever+" -o %T"); err != nil || out != "RUNNING\nRUNNING\n" {
		t.Fatalf("jobs %s and %s while the operator waits for them: %q %v, want both RUNNING", running, forever, out, err)
	}
	e.release(t, login, running)
	if state, exit, _ := e.jobEnd(t, login, running, 4*time.Minute); state != "COMPLETED" {
		t.Fatalf("job %s that ran across the rotation: %s (exit %s)", running, state, exit)
	}
	// The job that would run for ever holds the rotation until the admin sets a deadline; then
	// the operator requeues it (Slurm counts the restart) and the rotation goes on.
	waitsFor(1)
	sc = e.cluster(t, "arot")
	e.update(t, sc, func() { metav1.SetMetaDataAnnotation(&sc.ObjectMeta, wellknown.AnnotationAuthKeyDeadline, "1s") })
	poll(t, 2*time.Minute, "job "+forever+" requeued past the deadline", func() error {
		out, err := e.sh(t, login, "login", "scontrol show job "+forever)
		if err != nil || !strings.Contains(out, "Restarts=1") {
			return fmt.Errorf("scontrol show job: %v\n%s", err, out)
		}
		return nil
	})
	e.cancel(t, login, forever) // a restarted held job would keep cpu-0 busy
	poll(t, 8*time.Minute, "rounds 2 and 3: k2 alone, loaded, AuthKeyRotated", func() error {
		r, loaded, err := ring()
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(e.cluster(t, "arot").Status.Conditions, sunkv1.ConditionAuthKeyRotated)
		if len(r.Keys) != 1 || r.Default() != "k2" || !loaded || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ring default %s, %d keys, loaded %v; condition %+v", r.Default(), len(r.Keys), loaded, c)
		}
		return nil
	})
	t.Logf("rotation done %s after the request", time.Since(asked).Round(time.Second))

	// sackd signs the login pod's commands: with the old key gone, a job submitted there proves
	// it reloaded the ring; one running on cpu-0 proves slurmd and a new slurmstepd did.
	b.afterRotation(t)
	// No daemon refused a credential for its key on the way (auth/slurm's errors, internal.c).
	for _, p := range []struct{ component, container string }{
		{wellknown.ComponentController, render.ControllerContainer},
		{wellknown.ComponentCompute, "slurmd"},
		{wellknown.ComponentLogin, render.SackdContainer},
		{wellknown.ComponentAccounting, "slurmdbd"},
	} {
		pod := e.podOf(t, "arot", p.component)
		log, err := e.logs(pod.Name, p.container)
		if err != nil {
			t.Fatal(err)
		}
		forKey, expired := credentialRefusals(log)
		if len(forKey) > 0 {
			t.Errorf("%s/%s refused %d credential(s) during the rotation:\n%s", pod.Name, p.container, len(forKey), strings.Join(forKey, "\n--\n"))
		}
		if len(expired) > 0 {
			t.Logf("%s/%s refused %d credential(s) only because they had expired (read over %ds after they were signed: the daemon stalled, whatever key signed them):\n%s",
				pod.Name, p.container, len(expired), authTokenTTL, strings.Join(expired, "\n--\n"))
		}
	}
}

// authTokenTTL is auth/slurm's credential lifetime in seconds (DEFAULT_TTL, auth_slurm.h).
const authTokenTTL = 60

// credentialRefusals finds the credentials a Slurm daemon's log shows it refused, each with
// the lines before it that give the cause, and splits them: refused for the key (an unknown
// kid, a signature that does not verify, or any cause the log does not name) and refused only
// for having expired. An expired credential is one the daemon read more than authTokenTTL
// after it was signed, i.e. a daemon that stalled (a re-execution under load); with a key
// problem, auth/slurm logs "could not find kid" or "jwt_decode" instead (decode_jwt,
// internal.c).
func credentialRefusals(log string) (forKey, expired []string) {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		switch {
		case namesKeyError(l):
			forKey = append(forKey, l)
		case strings.Contains(l, "Protocol authentication error"):
			switch cause := refusalCause(lines, i); {
			case strings.Contains(cause, "token expired at"):
				expired = append(expired, cause+"\n"+l)
			case namesKeyError(cause):
				// counted at its own line
			default:
				forKey = append(forKey, strings.Join(lines[max(0, i-4):i+1], "\n"))
			}
		}
	}
	return forKey, expired
}

// namesKeyError reports auth/slurm's errors for a credential's key: an unknown kid, a
// signature that does not verify, a credential it could not read.
func namesKeyError(s string) bool {
	for _, e := range []string{"could not find kid", "jwt_decode", "Invalid authentication credential"} {
		if strings.Contains(s, e) {
			return true
		}
	}
	return false
}

// refusalCause returns the lines auth/slurm logged for the refusal at lines[i]
// (slurm_unpack_received_msg's "[peer] Protocol authentication error"): the two lines before
// the same peer's "auth_g_verify" line, the cause and verify_internal's. Other threads' lines
// may come between, so it looks a few lines back; "" when the log does not show them.
func refusalCause(lines []string, i int) string {
	_, peer, ok := strings.Cut(lines[i], "slurm_unpack_received_msg: [")
	if !ok {
		return ""
	}
	peer, _, _ = strings.Cut(peer, "]")
	for j := i - 1; j >= 0 && j >= i-6; j-- {
		if strings.Contains(lines[j], "["+peer+"] auth_g_verify") {
			return strings.Join(lines[max(0, j-2):j+1], "\n")
		}
	}
	return ""
}

// logs is a container's whole log.
func (e *operatorEnv) logs(pod, container string) (string, error) {
	return e.exec.Log(context.Background(), e.ns, pod, container, time.Unix(0, 0))
}
