//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// keyFiles lists the key files under / that the caller can read; /proc and /sys are skipped
// (a process's environment is checked on its own).
const keyFiles = `find / \( -path /proc -o -path /sys \) -prune -o \( -name slurm.key -o -name slurm.jwks -o -name 'jwt*.key' \) -type f -readable -print 2>/dev/null; true`

// loginHoldsNoKey: the container users log into holds no slurm.key, no JWT key and no
// ServiceAccount token, not even for its root; sackd, in a container of its own, still signs a
// normal user's job, and slurmctld refuses root's; and sshd refuses root by default (issue 21,
// docs/security.md). Any cluster shows it: TestJWTKeyRotation checks it on its cluster, with node cpu-0, after its
// rotation (a cluster of its own cost a whole cluster's start for these checks alone).
func (e *operatorEnv) loginHoldsNoKey(t *testing.T, cluster string) {
	t.Helper()
	login := e.podOf(t, cluster, wellknown.ComponentLogin).Name
	must := func(container, script string) string {
		t.Helper()
		out, err := e.sh(t, login, container, script)
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", container, script, err, out)
		}
		return strings.TrimSpace(out)
	}

	// Not vacuous: the key is there, in sackd's container, for sackd's user alone.
	// sackd reads the Secret volume's file itself (a rotated ring reaches it on reconfigure).
	if got := must("sackd", "stat -L -c '%U:%G %a' /etc/sunk/keys/slurm.key"); got != "root:slurm 440" {
		t.Errorf("sackd's key: %q, want root:slurm 440", got)
	}
	if got := must("login", "runuser -u nobody -- sh -c '"+strings.ReplaceAll(keyFiles, "'", `'\''`)+"'"); got != "" {
		t.Errorf("key files a user can read in the login container:\n%s", got)
	}
	if got := must("login", keyFiles); got != "" {
		t.Errorf("key files in the login container (root):\n%s", got)
	}
	for what, script := range map[string]string{
		"no keys mount":                         "test ! -e /etc/sunk/keys",
		"no ServiceAccount token":               "test ! -e /var/run/secrets/kubernetes.io/serviceaccount/token",
		"no process with SLURM_SACK_KEY":        "! grep -ls SLURM_SACK_KEY /proc/[0-9]*/environ | grep -q .",
		"sackd's processes are not seen":        "! pgrep -x sackd",
		"/run/slurm is read-only":               "! touch /run/slurm/x 2>/dev/null",
		"a user reads no token either":          "runuser -u nobody -- test ! -r /var/run/secrets/kubernetes.io/serviceaccount/token",
		"sshd refuses root (effective setting)": "sshd -T | grep -ix 'permitrootlogin no'",
	} {
		if out, err := e.sh(t, login, "login", script); err != nil {
			t.Errorf("%s: %s: %v\n%s", what, script, err, out)
		}
	}

	// Root is Slurm's admin here, not a user: sackd signs its job like any other, and
	// slurmctld refuses it (DisableRootJobs=YES).
	if out, err := e.sh(t, login, "login", "cd /tmp && sbatch --wrap true 2>&1"); err == nil || !strings.Contains(out, "Invalid user id") {
		t.Errorf("root's sbatch: %v %q, want it refused with %q", err, out, "Invalid user id")
	}

	// A normal user's job still runs: sackd signs for the uid the kernel reports.
	e.waitIdle(t, login, 4*time.Minute, "cpu-0 idle", "cpu-0")
	id := must("login", testenv.AsUser(`sbatch --parsable --chdir=/tmp --output=/dev/null --wrap 'test "$(id -un)" = nobody'`))
	if state, exit, _ := e.jobEnd(t, login, id, 3*time.Minute); state != "COMPLETED" {
		t.Fatalf("nobody's job %s: %s (exit %s), want COMPLETED", id, state, exit)
	}
}
