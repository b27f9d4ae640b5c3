package container

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// bindEtc puts the pod's name resolution and the user's passwd and group entries into the
// container: tools that ask "who am I" (id, ssh, Python's getpass) must find the user, and the
// image cannot know the cluster's users. The files are bound read-only over the image's.
func bindEtc(rootFD int, s NSSpec) error {
	for _, f := range []string{"/etc/hosts", "/etc/resolv.conf"} {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if err := bindFile(rootFD, f, f, s.Writable); err != nil {
			return err
		}
	}
	for _, db := range []struct {
		path    string
		entries []string
	}{
		{"/etc/passwd", []string{s.User}},
		{"/etc/group", s.Groups},
	} {
		image, err := readIn(rootFD, db.path)
		if err != nil {
			return err
		}
		out := filepath.Join(s.Dir, filepath.Base(db.path))
		if err := os.WriteFile(out, []byte(withEntries(image, db.entries)), 0o644); err != nil {
			return err
		}
		if err := bindFile(rootFD, out, db.path, s.Writable); err != nil {
			return err
		}
	}
	return nil
}

// withEntries is a passwd or group file with the cluster's entries in it: an image line with
// the same name (first field) or id (third field) as one of them is dropped, so that `id`,
// `whoami` and `ls -l` name the job's user and groups as the cluster does, not as the image's
// author happened to (Docker images often have a user of their own at uid 1000).
func withEntries(file string, entries []string) string {
	names, ids := map[string]bool{}, map[string]bool{}
	var add []string
	for _, e := range entries {
		e = strings.TrimSpace(e)
		f := strings.Split(e, ":")
		if len(f) < 3 {
			continue
		}
		names[f[0]], ids[f[2]] = true, true
		add = append(add, e)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(file, "\n"), "\n") {
		f := strings.Split(l, ":")
		if l == "" || (len(f) > 2 && (names[f[0]] || ids[f[2]])) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(append(out, add...), "\n") + "\n"
}

// readIn reads path inside the container's root (not following links out of it); a missing
// file reads as empty.
func readIn(rootFD int, path string) (string, error) {
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(rootFD, path, how)
	if errors.Is(err, unix.ENOENT) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s in the image: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	return string(b), err
}

// bindFile binds the pod's file src read-only over dst in the container. An image without dst
// gets it only when writable; a read-only image without /etc/hosts goes without.
func bindFile(rootFD int, src, dst string, create bool) error {
	t, err := cloneTree(unix.AT_FDCWD, src, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_RDONLY)
	if err != nil {
		return err
	}
	if !create {
		how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(rootFD, dst, how)
		if errors.Is(err, unix.ENOENT) {
			unix.Close(t)
			return nil
		}
		if err == nil {
			unix.Close(fd)
		}
	}
	return moveInto(rootFD, t, dst, create, false)
}
