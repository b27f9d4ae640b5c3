package container

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Auth is where a step's registry credentials come from (auth.go).
type Auth struct {
	// NodeDir holds the node's dockerconfigjson files (--auth-dir), "" for none.
	NodeDir string
	// Job is whose pull it is: the user's file is read with the user's ids.
	Job Job
	// Home is the user's home directory on the node ("" if the user has none).
	Home string
}

// maxCredentials bounds what is read of a user's credentials file.
const maxCredentials = 64 << 10

// authFile is the --authfile for img's registry in tmpDir (root's), or "" for none; cleanup
// removes what it wrote. The user's credentials come first: enroot's, and the user asked for
// them by keeping the file. USER@ in the image demands the user's entry of that login.
func (a Auth) authFile(img Image, tmpDir string) (file string, cleanup func(), err error) {
	cleanup = func() {}
	if a.Home != "" {
		text, err := a.readAsUser(filepath.Join(a.Home, NetrcPath))
		if err != nil {
			return "", cleanup, fmt.Errorf("~/%s: %v", NetrcPath, err)
		}
		if e, ok := MatchNetrc(ParseNetrc(text), img.Registry, img.User); ok {
			if err := os.MkdirAll(tmpDir, 0o700); err != nil {
				return "", cleanup, err
			}
			f, err := os.CreateTemp(tmpDir, "user-*.json")
			if err != nil {
				return "", cleanup, err
			}
			cleanup = func() { os.Remove(f.Name()) }
			_, err = f.Write(AuthFile(img.Registry, e.Login, e.Password))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return f.Name(), cleanup, err
		}
	}
	if img.User != "" {
		return "", cleanup, fmt.Errorf("%s: no credentials of login %q for %s in ~/%s", img, img.User, img.Registry, NetrcPath)
	}
	if a.NodeDir == "" {
		return "", cleanup, nil
	}
	// The node's: the first file (the NodeSet's order) that names the registry, as it is.
	files, err := filepath.Glob(filepath.Join(a.NodeDir, "*.json"))
	if err != nil {
		return "", cleanup, err
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", cleanup, fmt.Errorf("the node's registry credentials: %v", err)
		}
		if AuthCovers(b, img.Registry) {
			return f, cleanup, nil
		}
	}
	return "", cleanup, nil
}

// readAsUser reads path with the user's ids (a missing file is ""): the user names the file,
// and a symbolic link to the node's credentials, or another user's, must fail as it would for
// the user.
func (a Auth) readAsUser(path string) (string, error) {
	var text string
	err := asUser(a.Job, func() error {
		// O_NONBLOCK: a FIFO there must not hang the step.
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("not a regular file")
		}
		b, err := io.ReadAll(io.LimitReader(f, maxCredentials))
		text = string(b)
		return err
	})
	return text, err
}

// asUser runs fn on an OS thread whose file-system ids and groups are the job's user's; the
// thread is thrown away afterwards (its credentials are not the process's).
func asUser(j Job, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends the thread with this goroutine.
		runtime.LockOSThread()
		gids := append([]uint32{j.GID}, j.GIDs...)
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gids)), uintptr(unsafe.Pointer(&gids[0])), 0); e != 0 {
			done <- fmt.Errorf("setgroups: %w", e)
			return
		}
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(j.GID), 0, 0)
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(j.UID), 0, 0)
		done <- fn()
	}()
	return <-done
}
