//go:build integration

// Package container_test runs sunk-container's prepare and remove for real (root, mount
// namespaces, overlayfs) on a small image the test writes itself (Debian's busybox-static),
// and enters the container as the plugin's tasks do (nsenter: setns, then the user's ids).
//
// prepare leaves a holder process in the container's mount namespace for as long as its stdin
// stays open (the plugin holds that pipe for the step); the tests hold it the same way and
// close it before remove. The helper makes no mount in the test's own namespace; the test fails
// if one is left under its directory.
package container_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sunk.dev/sunk/test/registry"
)

const uid, gid = "1000", "1000"

func TestPrepareEnterRemove(t *testing.T) {
	dir, helper := helperBed(t)
	rootfs := registry.BusyboxRootFS(t, dir)

	shared := filepath.Join(dir, "shared")
	must(t, os.MkdirAll(filepath.Join(shared, "private/pub"), 0o755))
	must(t, os.Chmod(filepath.Join(shared, "private"), 0o700))
	must(t, os.WriteFile(filepath.Join(shared, "file"), []byte("from the shared volume\n"), 0o644))

	state := filepath.Join(dir, "state")
	job := func(step string) []string {
		return []string{"--job-id=7", "--step-id=" + step, "--uid=" + uid, "--gid=" + gid,
			"--state-dir=" + state, "--rootfs=" + rootfs, "--container-image=localhost:5000/test/busybox:1"}
	}
	helperRun := func(args ...string) (string, error) {
		out, err := exec.Command(helper, args...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), errorString(string(ee.Stderr))
		}
		return string(out), err
	}
	var holders holders
	t.Cleanup(func() {
		holders.release()
		for _, step := range []string{"0", "1", "2"} {
			if _, err := helperRun(append([]string{"remove"}, job(step)...)...); err != nil {
				t.Errorf("remove step %s: %v", step, err)
			}
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mi), dir) {
			t.Errorf("mounts left under the test's directory:\n%s", grepLines(string(mi), dir))
		}
	})

	ns, err := holders.prepare(helper, append(job("0"), "--container-mounts="+shared+":/data:ro")...)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	enter := func(script string) string {
		t.Helper()
		out, _ := exec.Command("nsenter", append(enterArgs(ns), "-S", uid, "-G", gid, "sh", "-c", script)...).CombinedOutput()
		return string(out)
	}
	for _, tc := range []struct{ script, want string }{
		{"cat /etc/os-release", `PRETTY_NAME="sunk test image 1"`},
		{"id -u; id -g", "1000\n1000\n"},
		{"/bin/euid", "euid=1000\n"},
		{"grep :1000: /etc/passwd >/dev/null && echo user-known", "user-known"},
		{"cat /data/file", "from the shared volume"},
		{"touch /data/x 2>&1", "Read-only file system"},
		{"touch /tmp/x && echo tmp-writable", "tmp-writable"},
		{"touch /x 2>&1", "Permission denied"},
	} {
		if got := enter(tc.script); !strings.Contains(got, tc.want) {
			t.Errorf("in the container, %q printed %q, want %q", tc.script, got, tc.want)
		}
	}

	// A mount source under a directory the user cannot search is refused, naming the flag.
	_, err = holders.prepare(helper, append(job("1"), "--container-mounts="+filepath.Join(shared, "private/pub")+":/p")...)
	if err == nil || !strings.HasPrefix(err.Error(), "sunk-container: --container-mounts: ") || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("prepare with a mount the user cannot reach: err = %v, want a --container-mounts permission error", err)
	}

	// --container-readonly: nothing but /tmp can be written, even where the image's modes allow.
	must(t, os.Chmod(filepath.Join(rootfs, "etc"), 0o777))
	ns, err = holders.prepare(helper, append(job("2"), "--container-readonly")...)
	if err != nil {
		t.Fatalf("prepare --container-readonly: %v", err)
	}
	if got := enter("touch /etc/x 2>&1"); !strings.Contains(got, "Read-only file system") {
		t.Errorf("read-only container: touch /etc/x printed %q", got)
	}
}

// holders runs sunk-container prepare as the plugin does and keeps what the plugin keeps: the
// write end of the holder's stdin.
type holders []*os.File

// prepare returns the holder prepare named (/proc/PID), or its one-line error.
func (h *holders) prepare(helper string, args ...string) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer r.Close()
	cmd := exec.Command(helper, append([]string{"prepare"}, args...)...)
	cmd.Stdin = r
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		w.Close()
		return "", errorString(string(ee.Stderr))
	}
	if err != nil {
		w.Close()
		return "", err
	}
	*h = append(*h, w)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		return "", fmt.Errorf("prepare printed %q, want mntns=, root= and environ= lines", out)
	}
	ns, ok1 := strings.CutPrefix(lines[0], "mntns=/proc/")
	root, ok2 := strings.CutPrefix(lines[1], "root=/proc/")
	_, ok3 := strings.CutPrefix(lines[2], "environ=/")
	pid := strings.TrimSuffix(ns, "/ns/mnt")
	if !ok1 || !ok2 || !ok3 || root != pid+"/root" {
		return "", fmt.Errorf("prepare printed %q, want mntns=/proc/PID/ns/mnt, root=/proc/PID/root and environ=FILE", out)
	}
	return "/proc/" + pid, nil
}

// enterArgs are nsenter's arguments that enter the container of holder (/proc/PID) as the
// plugin does: its mount namespace, then its root.
func enterArgs(holder string) []string {
	return []string{"--mount=" + holder + "/ns/mnt", "--root=" + holder + "/root"}
}

// release lets every holder go, as slurm_spank_exit does.
func (h *holders) release() {
	for _, w := range *h {
		w.Close()
	}
	*h = nil
}

type errorString string

func (e errorString) Error() string { return strings.TrimSpace(string(e)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// helperBed is the opening of every test here: root (the helper makes mount namespaces and
// overlays), a temporary directory the job's user can reach (t.TempDir and its parent are
// 0700), and sunk-container built into it.
func helperBed(t *testing.T) (dir, helper string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("sunk-container needs root (mount namespaces, overlayfs)")
	}
	dir = t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	return dir, buildHelper(t, dir)
}

// buildHelper builds sunk-container into dir.
func buildHelper(t *testing.T, dir string) string {
	t.Helper()
	helper := filepath.Join(dir, "sunk-container")
	if out, err := exec.Command("go", "build", "-o", helper, "sunk.dev/sunk/cmd/sunk-container").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return helper
}
