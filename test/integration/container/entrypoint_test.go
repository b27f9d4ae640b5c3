//go:build integration

package container_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sunk.dev/sunk/test/registry"
)

// TestEntrypoint: --container-entrypoint runs the image's entrypoint (the cache's record of
// it, rootfs.entrypoint) once, when the container is made, as the user, in the container with
// the image's environment; the tasks see what it left in the container. A later step of the
// named container does not run it again; without the flag it does not run; a failing one
// fails prepare in one line naming the flag.
func TestEntrypoint(t *testing.T) {
	dir, helper := helperBed(t)
	rootfs := registry.BusyboxRootFS(t, dir)
	must(t, os.MkdirAll(filepath.Join(rootfs, "scratch"), 0o777))
	must(t, os.Chmod(filepath.Join(rootfs, "scratch"), 0o777|os.ModeSticky))
	must(t, os.WriteFile(filepath.Join(rootfs, "bin/init.sh"), []byte("#!/bin/sh\necho \"ran as $(id -u) args $# FROM=$FROM_IMAGE\" >> /scratch/entry\n[ -z \"$FAIL\" ] || { echo \"entrypoint says no\"; exit 3; }\n"), 0o755))
	must(t, os.WriteFile(rootfs+".env", []byte(`["PATH=/bin","FROM_IMAGE=yes"]`), 0o644))
	must(t, os.WriteFile(rootfs+".entrypoint", []byte(`["init.sh"]`), 0o644))

	state := filepath.Join(dir, "state")
	job := func(step string, extra ...string) []string {
		return append([]string{"--job-id=9", "--step-id=" + step, "--uid=" + uid, "--gid=" + gid,
			"--state-dir=" + state, "--rootfs=" + rootfs}, extra...)
	}
	var holders holders
	t.Cleanup(func() {
		holders.release()
		if out, err := exec.Command(helper, "remove-job", "--job-id=9", "--state-dir="+state).CombinedOutput(); err != nil {
			t.Errorf("remove-job: %v %s", err, out)
		}
	})
	entries := func(ns string) string {
		t.Helper()
		out, _ := exec.Command("nsenter", append(enterArgs(ns), "-S", uid, "-G", gid, "sh", "-c", "cat /scratch/entry 2>&1")...).CombinedOutput()
		return string(out)
	}
	const image = "--container-image=localhost:5000/test/busybox:1"

	ns, err := holders.prepare(helper, job("0", image, "--container-entrypoint", "--container-name=e")...)
	if err != nil {
		t.Fatalf("prepare --container-entrypoint: %v", err)
	}
	if got, want := entries(ns), "ran as 1000 args 0 FROM=yes\n"; got != want {
		t.Errorf("after prepare --container-entrypoint, /scratch/entry is %q, want %q", got, want)
	}
	holders.release()
	// The named container's next step: its files, but no second run.
	ns, err = holders.prepare(helper, job("1", "--container-entrypoint", "--container-name=e")...)
	if err != nil {
		t.Fatalf("prepare the named container again: %v", err)
	}
	if got, want := entries(ns), "ran as 1000 args 0 FROM=yes\n"; got != want {
		t.Errorf("a named container's second step: /scratch/entry is %q, want %q (one run)", got, want)
	}
	// Without the flag: not run.
	ns, err = holders.prepare(helper, job("2", image)...)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if got := entries(ns); !strings.Contains(got, "No such file") {
		t.Errorf("without --container-entrypoint, /scratch/entry is %q, want none", got)
	}
	// A failing entrypoint fails the step with its last line.
	must(t, os.WriteFile(rootfs+".env", []byte(`["PATH=/bin","FAIL=1"]`), 0o644))
	_, err = holders.prepare(helper, job("3", image, "--container-entrypoint")...)
	if err == nil || !strings.HasPrefix(err.Error(), "sunk-container: --container-entrypoint: init.sh: exit status 3: entrypoint says no") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a failing entrypoint: err = %v, want one line naming the flag, the exit status and its output", err)
	}
}
