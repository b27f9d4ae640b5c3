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

// checkLoginPool shows a PerUser login pool (spec.login.pools: users, group analysts, grace
// period 3 s) on the cluster TestLDAPUserJobAndAccounting runs: ada and grace, members of
// analysts in the real directory, each get a login pod of their own; each logs in to hers
// over ssh with the key the directory holds, as herself, with no way to root and no one
// else's process in sight; grace cannot cancel or change ada's job, and ada's key does not
// open grace's pod. grace then leaves the group (the directory restarts with its new seed,
// unreadable meanwhile): her pod goes after the grace period, ada's stays.
func (e *operatorEnv) checkLoginPool(t *testing.T, name string, n clusternames.Names, adaKey, graceKey ssh.Signer) {
	t.Helper()
	ctx := context.Background()
	ada, grace := n.LoginUser("users", "ada"), n.LoginUser("users", "grace")
	started := time.Now()
	poll(t, 3*time.Minute, "ada's and grace's login pods Ready", func() error {
		st := e.cluster(t, name).Status.LoginPools
		if len(st) != 1 || st[0].Ready != 2 || !slices.Equal(st[0].Users, []string{"ada", "grace"}) {
			return fmt.Errorf("status.loginPools %+v", st)
		}
		return nil
	})
	t.Logf("ada's and grace's login pods Ready %s after the cluster's compute node", time.Since(started).Round(time.Second))

	// In her pod ada is herself, every process is hers, and nothing can gain a privilege.
	out, err := e.sshTo(t, ada, ada, "ada", adaKey, `id -un; id -u; ps -eo user= | sort -u; grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd):' /proc/self/status | tr -s '\t' ' '`, "")
	want := "ada\n20001\nada\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1"
	if err != nil || out != want {
		t.Fatalf("in ada's pod: %v\n%s\nwant\n%s", err, out, want)
	}
	job, err := e.sshTo(t, ada, ada, "ada", adaKey, "sbatch --parsable --hold -J pool-ada -D /tmp -o /dev/null --wrap 'sleep 600'", "")
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
	addr, cfg := e.sshConfig(t, grace, grace, "ada", adaKey)
	if c, err := ssh.Dial("tcp", addr, cfg); err == nil {
		c.Close()
		t.Fatalf("ada's key opened grace's pod")
	} else if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("ada into grace's pod: %v, want unable to authenticate", err)
	}
	if _, err := e.sshTo(t, ada, ada, "ada", adaKey, "scancel "+job, ""); err != nil {
		t.Fatal(err)
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
	seed.Data["directory.ldif"] = strings.Replace(ldif, "\nmemberUid: grace", "", 1)
	if err := e.c.Update(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if err := e.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(e.ns), client.MatchingLabels{"app.kubernetes.io/component": "directory"}); err != nil {
		t.Fatal(err)
	}
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
}
