package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
)

// SlurmEnv is the standalone real Slurm of hack/env-slurm.sh: slurmctld, slurmrestd (JWT) and
// dynamic slurmd nodes, of the release SUNK_SLURM_VERSION selects (24.11 by default, or 26.05).
type SlurmEnv struct {
	SlurmVersion string   `json:"slurmVersion"` // as sinfo --version says: 24.11.5, 26.05.5
	RESTURL      string   `json:"restURL"`
	JWTKeyFile   string   `json:"jwtKeyFile"`
	User         string   `json:"user"`
	Nodes        []string `json:"nodes"`
	SharedDir    string   `json:"sharedDir"` // mounted at /shared on every node and in Exec
	ClusterName  string   `json:"clusterName"`
	ExecCommand  []string `json:"execCommand"`

	apiVersions []string
}

// SlurmStateDir is the state directory of the test bed SUNK_SLURM_VERSION selects, as
// hack/lib.sh names it: state/slurm for 24.11 (the default), state/slurm-<version> otherwise.
func SlurmStateDir() string {
	if v := os.Getenv("SUNK_SLURM_VERSION"); v != "" && v != "24.11" {
		return filepath.Join(StateDir(), "slurm-"+v)
	}
	return filepath.Join(StateDir(), "slurm")
}

// Slurm starts the Slurm environment unless it is already up, and describes it.
func Slurm(t testing.TB) *SlurmEnv {
	t.Helper()
	hack(t, "env-slurm.sh", "up")
	raw, err := os.ReadFile(filepath.Join(SlurmStateDir(), "env.json"))
	if err != nil {
		t.Fatalf("testenv: slurm environment has no env.json: %v", err)
	}
	env := &SlurmEnv{}
	if err := json.Unmarshal(raw, env); err != nil {
		t.Fatalf("testenv: decoding slurm env.json: %v", err)
	}
	t.Logf("testenv: Slurm %s, slurmrestd %s", env.SlurmVersion, env.RESTURL)
	return env
}

// SlurmSince is Slurm for a test of a feature that Slurm has from release since on: on an older
// test bed it skips t, saying what that release lacks ("reads no topology.yaml") and how to run
// the test (the 24.11 pass of make test skips it, the 26.05 pass runs it).
func SlurmSince(t testing.TB, since, lacks string) *SlurmEnv {
	t.Helper()
	env := Slurm(t)
	if v := env.SlurmVersion; v == "" || v < since {
		t.Skipf("Slurm %q %s (%s and later do): run with SUNK_SLURM_VERSION=26.05", v, lacks, since)
	}
	return env
}

// APIVersions are the REST API versions that both pkg/slurm and the test bed's slurmrestd know,
// oldest first (slurm.Discover, asked once).
func (e *SlurmEnv) APIVersions(t testing.TB) []string {
	t.Helper()
	if e.apiVersions != nil {
		return e.apiVersions
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	served, err := slurm.Discover(ctx, slurm.Config{URL: e.RESTURL, Tokens: slurm.StaticToken{User: e.User, Value: e.Token(t, e.User)}})
	if err != nil {
		t.Fatalf("testenv: which REST API versions slurmrestd serves: %v", err)
	}
	for _, v := range slurm.Versions() {
		if slices.Contains(served.Versions, v) {
			e.apiVersions = append(e.apiVersions, v)
		}
	}
	if len(e.apiVersions) == 0 {
		t.Fatalf("testenv: slurmrestd (Slurm %s) serves %v, none of %v", e.SlurmVersion, served.Versions, slurm.Versions())
	}
	t.Logf("testenv: Slurm %s serves REST API %v", e.SlurmVersion, e.apiVersions)
	return e.apiVersions
}

// JWTKey is the HS256 key slurmctld and slurmrestd verify tokens with.
func (e *SlurmEnv) JWTKey(t testing.TB) []byte {
	t.Helper()
	key, err := os.ReadFile(e.JWTKeyFile)
	if err != nil {
		t.Fatalf("testenv: reading the slurm jwt key: %v", err)
	}
	return key
}

// Tokens mints the bed's SlurmUser tokens from its JWT key file, as sunk's components do.
func (e *SlurmEnv) Tokens(t testing.TB) *slurm.JWTSource {
	t.Helper()
	src, err := slurm.NewJWTSourceFromFile(e.User, e.JWTKeyFile)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return src
}

// WatcherAuth checks a node watcher's readers as sunk-nodewatch in a slurmctld pod does: a
// token of the bed's JWT key naming its SlurmUser.
func (e *SlurmEnv) WatcherAuth(t testing.TB) *nodewatch.JWTAuth {
	t.Helper()
	a, err := nodewatch.NewJWTAuth(e.User, e.JWTKeyFile)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return a
}

// Token mints a token for user, valid for an hour, with sunk's own token source.
func (e *SlurmEnv) Token(t testing.TB, user string) string {
	t.Helper()
	src, err := slurm.NewJWTSource(user, e.JWTKey(t), slurm.WithLifetime(time.Hour))
	if err != nil {
		t.Fatalf("testenv: slurm token source: %v", err)
	}
	_, tok, err := src.Token(context.Background())
	if err != nil {
		t.Fatalf("testenv: minting a slurm token: %v", err)
	}
	return tok
}

// Exec runs a Slurm command (scontrol, sbatch, sinfo, ...) on the controller host as root and
// returns its output.
func (e *SlurmEnv) Exec(args ...string) (string, error) {
	all := append(append([]string{}, e.ExecCommand[1:]...), args...)
	out, err := run(e.ExecCommand[0], all...)
	return strings.TrimSpace(out), err
}

// NodeReaderBinary builds sunk-slurm-nodes for the test bed's release (hack/nodewatch.sh) and
// returns its path on this host.
func NodeReaderBinary(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "nodewatch.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testenv: hack/nodewatch.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// NodeReader builds sunk-slurm-nodes for the test bed's release (NodeReaderBinary), puts it in
// the shared directory and returns the command that runs it on the controller host with the
// given arguments (pkg/nodewatch.Run runs it).
func (e *SlurmEnv) NodeReader(t testing.TB, args ...string) []string {
	t.Helper()
	bin, err := os.ReadFile(NodeReaderBinary(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	name := "sunk-slurm-nodes-" + e.SlurmVersion
	if err := os.WriteFile(filepath.Join(e.SharedDir, name+".tmp"), bin, 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := os.Rename(filepath.Join(e.SharedDir, name+".tmp"), filepath.Join(e.SharedDir, name)); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return append(append(slices.Clone(e.ExecCommand), "/shared/"+name), args...)
}

// NodeWatcherProcess runs the real sunk-nodewatch, built from this checkout, in a process group
// of its own (so that its table does not count in the caller's heap or CPU) with the test bed's
// reader every interval, as in a slurmctld pod, listening on listen and answering tokens of the
// bed's JWT key that name user. It is stopped when the test ends (SIGTERM, which takes its
// reader's group along; SIGKILL after 10 s). It returns the process id.
func (e *SlurmEnv) NodeWatcherProcess(t testing.TB, listen, user string, interval time.Duration) int {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sunk-nodewatch")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sunk-nodewatch")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sunk-nodewatch: %v: %s", err, out)
	}
	// The reader as one program (sunk-nodewatch runs READER -i MS): the test bed's command for it.
	var quoted []string
	for _, a := range e.NodeReader(t) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	reader := filepath.Join(dir, "reader")
	if err := os.WriteFile(reader, []byte("#!/bin/sh\nexec "+strings.Join(quoted, " ")+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--listen", listen, "--reader", reader, "--interval", interval.String(), "--jwt-key", e.JWTKeyFile, "--user", user)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	return cmd.Process.Pid
}

// SubmitHeldJobs submits n held one-node jobs named name (a minute's limit, output discarded)
// through c, 8 at a time: the pending load of the scale benchmarks, which cancel them by name
// at the end. It fails tb at the first refusal.
func SubmitHeldJobs(tb testing.TB, ctx context.Context, c slurm.Client, name string, n int) {
	tb.Helper()
	Parallel(tb, n, 8, func(i int) error {
		_, err := c.SubmitJob(ctx, slurm.JobSubmit{Name: name, Script: "#!/bin/sh\ntrue\n", Partition: "all",
			MinNodes: 1, MaxNodes: 1, Hold: true, TimeLimit: time.Minute, StdOut: "/dev/null"})
		if err != nil {
			return fmt.Errorf("job %d of %d (slurmctld refuses jobs past MaxJobCount; ended ones leave after MinJobAge): %w", i+1, n, err)
		}
		return nil
	})
}
