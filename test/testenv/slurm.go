package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
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

// Token mints a token for user, valid for an hour, the way `scontrol token` does.
func (e *SlurmEnv) Token(t testing.TB, user string) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "sun": user,
	}).SignedString(e.JWTKey(t))
	if err != nil {
		t.Fatalf("testenv: signing a slurm token: %v", err)
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
