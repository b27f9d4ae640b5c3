package testenv

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// SlurmEnv is the standalone real Slurm of hack/env-slurm.sh: slurmctld, slurmrestd (JWT) and
// dynamic slurmd nodes.
type SlurmEnv struct {
	RESTURL     string   `json:"restURL"`
	JWTKeyFile  string   `json:"jwtKeyFile"`
	User        string   `json:"user"`
	Nodes       []string `json:"nodes"`
	SharedDir   string   `json:"sharedDir"` // mounted at /shared on every node and in Exec
	ClusterName string   `json:"clusterName"`
	ExecCommand []string `json:"execCommand"`
}

// Slurm starts the Slurm environment unless it is already up, and describes it.
func Slurm(t testing.TB) *SlurmEnv {
	t.Helper()
	hack(t, "env-slurm.sh", "up")
	raw, err := os.ReadFile(filepath.Join(StateDir(), "slurm", "env.json"))
	if err != nil {
		t.Fatalf("testenv: slurm environment has no env.json: %v", err)
	}
	env := &SlurmEnv{}
	if err := json.Unmarshal(raw, env); err != nil {
		t.Fatalf("testenv: decoding slurm env.json: %v", err)
	}
	return env
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
