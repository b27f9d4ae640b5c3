// Package testenv starts or attaches to the real environments of the test bed (hack/env-*.sh)
// for integration and end-to-end tests. A test that asks for an environment and cannot get one
// fails with the reason; it never skips, so a green run always means the real thing answered.
package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RepoRoot is the root of the sunk checkout the tests run from: the nearest directory above
// the working directory (go test runs a test in its package's) whose go.mod is sunk's. Not the
// test's own file path: hack/lib.sh builds with -trimpath, which leaves no checkout path in it.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic("testenv: " + err.Error())
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module sunk.dev/sunk\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("testenv: no sunk checkout (a go.mod of module sunk.dev/sunk) above the working directory")
		}
		dir = parent
	}
}

// CacheDir is where hack/ keeps binaries, root filesystems and environment state.
func CacheDir() string {
	if d := os.Getenv("SUNK_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "sunk")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		panic(err)
	}
	return filepath.Join(home, ".cache", "sunk")
}

// StateDir is where the running environments keep their files.
func StateDir() string {
	if d := os.Getenv("SUNK_STATE"); d != "" {
		return d
	}
	return filepath.Join(CacheDir(), "state")
}

// hack runs a hack/ script and fails the test with its output when it fails.
func hack(t testing.TB, script string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", script), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: hack/%s %v failed: %v\n%s", script, args, err, out.String())
	}
}

// Hack runs a hack/ script and returns its combined output.
func Hack(script string, args ...string) (string, error) {
	return run(filepath.Join(RepoRoot(), "hack", script), args...)
}

// run executes a command and returns its combined output, with the command in the error.
func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %v: %w\n%s", name, args, err, out.String())
	}
	return out.String(), nil
}

// StartLogged starts cmd with its output in logFile and kills it when the test ends: before
// the cleanups registered earlier run, so that those find its log whole.
func StartLogged(tb testing.TB, cmd *exec.Cmd, logFile string) {
	tb.Helper()
	log, err := os.Create(logFile)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		tb.Fatalf("starting %v: %v", cmd.Args, err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
}

// FreeAddr is HOST:PORT where nothing listens (it did a moment ago): for a server a test
// starts on a port of its own.
func FreeAddr(tb testing.TB, host string) string {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
