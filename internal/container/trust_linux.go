package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The helper runs as root and creates, reads, locks and deletes what it finds below its state
// and cache directories. Whoever may create, rename or remove an entry anywhere on the way to
// them can point root at any file of the node: a job that renames STATE aside and plants
// STATE/JOB -> /shared has its epilog's RemoveJob empty /shared. So before it touches anything
// there the helper checks that only root can change the path: every directory from / down is a
// real directory (no symlink), owned by root, and writable by nobody else. A sticky directory
// (/tmp) passes as an ancestor: others may add entries to it but not rename or remove root's,
// and the entry below it is checked in turn. Below the checked directory the helper goes on
// without following links: os.RemoveAll opens each directory with O_NOFOLLOW, and the
// containers' writable layers, where users write, are below root-owned directories 0755.
//
// kubelet makes an emptyDir 0777 without the sticky bit; the compute pod's entrypoint makes
// /var/lib/sunk root's, 0755, before slurmd starts (images/slurm/rootfs/usr/local/sbin/sunk-entrypoint).

// errUntrusted is the error of a path that someone other than root could change.
var errUntrusted = errors.New("someone other than root could change it")

// trustedDir returns nil when dir exists and it and every directory above it can be changed by
// root alone (see above); otherwise an error naming the first directory that fails, and why
// (one that errors.Is os.ErrNotExist when a directory of the path does not exist).
func trustedDir(dir string) error { return checkPath(dir, true) }

// checkPath is trustedDir with whole true. With whole false it checks only the part of the path
// that exists, stopping at the first directory missing, and the deepest may be sticky as an
// ancestor may: what mkdirTrusted must know before it creates the rest.
func checkPath(dir string, whole bool) error {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s: not an absolute path", dir)
	}
	p := "/"
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	if dir == "/" {
		parts = nil
	}
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			p = filepath.Join(p, parts[i])
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if !whole && errors.Is(err, unix.ENOENT) {
				return nil
			}
			return &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		last := whole && i == len(parts)-1
		if err := trustedMode(st, last); err != nil {
			return fmt.Errorf("%s: %s: %w (the compute pod's entrypoint makes %s root's, 0755)", p, err.Error(), errUntrusted, filepath.Dir(DefaultStateDir))
		}
	}
	return nil
}

// trustedMode is the check of one directory of trustedDir's path; last is the directory asked
// about, which must not be sticky either (entries in it are the helper's alone).
func trustedMode(st unix.Stat_t, last bool) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return errors.New("a symbolic link")
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return errors.New("not a directory")
	case st.Uid != 0:
		return fmt.Errorf("owned by uid %d, not root", st.Uid)
	case st.Mode&0o022 != 0 && (last || st.Mode&unix.S_ISVTX == 0):
		return fmt.Errorf("writable by group or others (mode %04o)", st.Mode&0o7777)
	}
	return nil
}

// mkdirTrusted is os.MkdirAll(dir, mode) between two checks: the part of the path that exists
// before (MkdirAll follows links, so a planted one would have root make directories elsewhere),
// and the whole path after: what it made, and what it found already there, root alone can change.
func mkdirTrusted(dir string, mode os.FileMode) error {
	if err := checkPath(dir, false); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return trustedDir(dir)
}
