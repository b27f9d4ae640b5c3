//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// checkLoginPool shows a Group login pool (team: analysts may log in, bob may not) and a
// PerUser login pool (users, group analysts, grace period 3 s) on the cluster
// TestLDAPUserJobAndAccounting runs: ada and grace, members of
// analysts in the real directory, each get a login pod of their own; each logs in to hers
// over ssh with the key the directory holds, as herself, with no way to root and no one
// else's process in sight; grace cannot cancel or change ada's job, and ada's key does not
// open grace's pod. grace then leaves the group (the directory restarts with its new seed,
// unreadable meanwhile): her pod goes after the grace period, ada's stays; back in the group,
// she gets a new pod and finds her home (a claim of the pool's) as she left it.
func (e *operatorEnv) checkLoginPool(t *testing.T, name string, n clusternames.Names, adaKey, graceKey, bobKey ssh.Signer) {
	t.Helper()
	ctx := context.Background()
	ada, grace := n.LoginUser("users", "ada"), n.LoginUser("users", "grace")
	started := time.Now()
	poll(t, 3*time.Minute, "ada's and grace's login pods and the team pool's Ready", func() error {
		st := e.cluster(t, name).Status.LoginPools
		if len(st) != 2 || st[0].Ready != 2 || !slices.Equal(st[0].Users, []string{"ada", "grace"}) || st[1].Ready != 1 {
			return fmt.Errorf("status.loginPools %+v", st)
		}
		return nil
	})
	t.Logf("ada's and grace's login pods Ready %s after the cluster's compute node", time.Since(started).Round(time.Second))

	// The Group pool team lets in analysts (its SSSD reads the directory) and refuses bob, who
	// is not one and may log in to the shared pods.
	team := n.LoginGroup("team")
	if out, err := e.sshTo(t, team, n.SSHHostKeySecret, "ada", adaKey, "id -un; hostname", ""); err != nil || out != "ada\n"+team+"-0" {
		t.Fatalf("ada in the team pool: %v %q", err, out)
	}
	if out, err := e.sshTo(t, n.Login, n.SSHHostKeySecret, "bob", bobKey, "id -un", ""); err != nil || out != "bob" {
		t.Fatalf("bob in the shared login pod: %v %q", err, out)
	}
	addr, cfg := e.sshConfig(t, team, n.SSHHostKeySecret, "bob", bobKey)
	if c, err := ssh.Dial("tcp", addr, cfg); err == nil {
		c.Close()
		t.Fatalf("bob, not in analysts, logged in to the team pool")
	} else if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("bob into the team pool: %v, want unable to authenticate", err)
	}

	// In her pod ada is herself, every process is hers, and nothing can gain a privilege.
	out, err := e.sshTo(t, ada, ada, "ada", adaKey, `id -un; id -u; ps -eo user= | sort -u; grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd):' /proc/self/status | tr -s '\t' ' '`, "")
	want := "ada\n20001\nada\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1"
	if err != nil || out != want {
		t.Fatalf("in ada's pod: %v\n%s\nwant\n%s", err, out, want)
	}
	job, err := e.sshTo(t, ada, ada, "ada", adaKey, "sbatch --parsable --hold -J pool-ada -w cpu-0 -D /tmp -o /tmp/pool-%j.out --wrap id", "")
	if err != nil {
		t.Fatal(err)
	}
	// grace's pod knows no other user than her (squeue may print ada's uid for her name).
	if out, err := e.sshTo(t, grace, grace, "grace", graceKey, "id -un; squeue -h -j "+job+" -o %u", ""); err != nil || (out != "grace\nada" && out != "grace\n20001") {
		t.Fatalf("grace sees ada's job %s: %v %q, want grace, then ada's name or uid", job, err, out)
	}
	// Slurm refuses a cancel with "Access/permission denied" and an update (release is one)
	// with "Invalid user id" (ESLURM_USER_ID_MISSING, src/slurmctld/job_mgr.c update_job).
	for cmd, refusal := range map[string]string{"scancel " + job: "Access/permission denied",
		"scontrol update jobid=" + job + " timelimit=5": "Invalid user id", "scontrol release " + job: "Invalid user id"} {
		out, err := e.sshTo(t, grace, grace, "grace", graceKey, cmd, "")
		if err == nil || !strings.Contains(out, refusal) {
			t.Fatalf("grace ran %q on ada's job: %v %q, want %s", cmd, err, out, refusal)
		}
	}
	if out, err := e.sshTo(t, ada, ada, "ada", adaKey, "squeue -h -j "+job+" -o '%T %r %l'", ""); err != nil || out != "PENDING JobHeldUser UNLIMITED" {
		t.Fatalf("ada's job after grace's attempts: %v %q, want PENDING JobHeldUser UNLIMITED", err, out)
	}
	addr, cfg = e.sshConfig(t, grace, grace, "ada", adaKey)
	if c, err := ssh.Dial("tcp", addr, cfg); err == nil {
		c.Close()
		t.Fatalf("ada's key opened grace's pod")
	} else if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("ada into grace's pod: %v, want unable to authenticate", err)
	}
	// grace's home is a claim of her own, hers alone, and not in ada's pod at all.
	if out, err := e.sshTo(t, grace, grace, "grace", graceKey, "echo notes > ~/notes && stat -c '%U %a' ~", ""); err != nil || out != "grace 700" {
		t.Fatalf("grace's home: %v %q, want grace 700", err, out)
	}
	if out, err := e.sshTo(t, ada, ada, "ada", adaKey, "cat /home/grace/notes", ""); err == nil {
		t.Fatalf("ada read grace's notes: %q", out)
	}

	// Each one's job runs on the compute pod as her, with her groups: ada releases hers, grace
	// submits one.
	if _, err := e.sshTo(t, ada, ada, "ada", adaKey, "scontrol release "+job, ""); err != nil {
		t.Fatal(err)
	}
	graceJob, err := e.sshTo(t, grace, grace, "grace", graceKey, "sbatch --parsable -J pool-grace -w cpu-0 -D /tmp -o /tmp/pool-%j.out --wrap id", "")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{job: adaID, graceJob: "uid=20002(grace) gid=20002(grace) groups=20002(grace),20100(analysts)"} {
		poll(t, 2*time.Minute, "job "+id+" writes its id", func() error {
			out, err := e.sh(t, "cpu-0", "slurmd", "cat /tmp/pool-"+id+".out")
			if err != nil || strings.TrimSpace(out) != want {
				return fmt.Errorf("job %s's output: %v %q, want %q", id, err, out, want)
			}
			return nil
		})
	}

	// grace leaves analysts: the directory restarts from its new seed.
	seed := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-directory-seed"}, seed); err != nil {
		t.Fatal(err)
	}
	ldif := seed.Data["directory.ldif"]
	if !strings.Contains(ldif, "\nmemberUid: grace") {
		t.Fatalf("the seed has no memberUid: grace:\n%s", ldif)
	}
	e.reseedDirectory(t, name, strings.Replace(ldif, "\nmemberUid: grace", "", 1))
	left := time.Now()
	poll(t, 3*time.Minute, "grace's login pod gone with its Secret and Service", func() error {
		for _, o := range []client.Object{&appsv1.StatefulSet{}, &corev1.Secret{}, &corev1.Service{}} {
			if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: grace}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %v", o, grace, err)
			}
		}
		return nil
	})
	t.Logf("grace's pod gone %s after the directory was restarted without her in analysts", time.Since(left).Round(time.Second))
	sts := &appsv1.StatefulSet{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: ada}, sts); err != nil {
		t.Fatalf("ada's login pod: %v", err)
	}
	if at, ok := sts.Annotations[wellknown.AnnotationLoginUserLeft]; ok {
		t.Fatalf("ada is marked as leaving (%s) though she never left", at)
	}

	// grace joins again: a new pod, her home as she left it.
	e.reseedDirectory(t, name, ldif)
	joined := time.Now()
	poll(t, 3*time.Minute, "grace's login pod back and Ready", func() error {
		s := &appsv1.StatefulSet{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: grace}, s); err != nil {
			return err
		}
		if s.Status.ReadyReplicas != 1 {
			return fmt.Errorf("statefulset %s: %d ready", grace, s.Status.ReadyReplicas)
		}
		return nil
	})
	if out, err := e.sshTo(t, grace, grace, "grace", graceKey, "cat ~/notes", ""); err != nil || out != "notes" {
		t.Fatalf("grace's notes after she came back: %v %q", err, out)
	}
	t.Logf("grace logged in to her new pod %s after the directory was restarted with her in analysts again", time.Since(joined).Round(time.Second))
}

// reseedDirectory restarts the chart's directory (slapd) of cluster name with ldif as its seed.
func (e *operatorEnv) reseedDirectory(t *testing.T, name, ldif string) {
	t.Helper()
	ctx := context.Background()
	seed := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-directory-seed"}, seed); err != nil {
		t.Fatal(err)
	}
	seed.Data["directory.ldif"] = ldif
	if err := e.c.Update(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if err := e.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(e.ns), client.MatchingLabels{"app.kubernetes.io/component": "directory"}); err != nil {
		t.Fatal(err)
	}
}
