package container

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustedDir: the helper works only below directories root alone can change; each way a
// job could have changed the path is refused, naming the directory.
func TestTrustedDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the checks are of root-owned directories: run as root (the helper runs as root)")
	}
	base := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		must(os.MkdirAll(p, 0o755))
		must(os.Chmod(p, mode))
		must(os.Chown(p, uid, uid))
		return p
	}
	good := mkdir("good/containers", 0o755, 0)
	open := mkdir("open", 0o777, 0) // kubelet's emptyDir
	mkdir("open/containers", 0o755, 0)
	sticky := mkdir("sticky", 0o777|os.ModeSticky, 0)
	mkdir("sticky/containers", 0o755, 0)
	theirs := mkdir("theirs", 0o755, 1000)
	mkdir("good/planted", 0o755, 1000)
	must(os.Symlink(good, filepath.Join(base, "link")))

	for _, c := range []struct {
		dir, want string // want: "" or a part of the error
	}{
		{good, ""},
		{filepath.Join(sticky, "containers"), ""}, // a sticky ancestor, as /tmp
		{filepath.Join(open, "containers"), "open: writable by group or others (mode 0777)"},
		{sticky, "sticky: writable by group or others (mode 1777)"}, // the helper's own directory may not be
		{theirs, "theirs: owned by uid 1000, not root"},
		{filepath.Join(base, "good/planted"), "planted: owned by uid 1000"},
		{filepath.Join(base, "link/containers"), "link: a symbolic link"},
		{filepath.Join(base, "missing"), "no such file"},
	} {
		err := trustedDir(c.dir)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("trustedDir(%s) = %v, want nil", c.dir, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("trustedDir(%s) = %v, want an error with %q", c.dir, err, c.want)
		case c.want != "" && c.want != "no such file" && !errors.Is(err, errUntrusted):
			t.Errorf("trustedDir(%s) = %v, want errUntrusted", c.dir, err)
		}
	}

	// mkdirTrusted makes nothing through a planted link: the part of the path that exists is
	// checked before MkdirAll, which follows links.
	target := mkdir("target", 0o700, 0)
	must(os.Symlink(target, filepath.Join(open, "job")))
	if err := mkdirTrusted(filepath.Join(open, "job/step-0"), 0o755); err == nil {
		t.Error("mkdirTrusted below a directory of mode 0777 succeeded")
	}
	if _, err := os.Lstat(filepath.Join(target, "step-0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mkdirTrusted made a directory through a planted link: %v", err)
	}
	if err := mkdirTrusted(filepath.Join(good, "7/step-0"), 0o755); err != nil {
		t.Errorf("mkdirTrusted below a trusted directory: %v", err)
	}

	// RemoveJob deletes nothing through a job directory someone else made.
	must(os.MkdirAll(filepath.Join(target, "keep"), 0o700))
	must(os.Symlink(target, filepath.Join(good, "9")))
	if err := RemoveJob(good, 9); err == nil {
		t.Error("RemoveJob through a planted link succeeded")
	}
	if _, err := os.Stat(filepath.Join(target, "keep")); err != nil {
		t.Errorf("RemoveJob through a planted link removed the link's target's entries: %v", err)
	}
}
