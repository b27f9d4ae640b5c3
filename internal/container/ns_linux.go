package container

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NSSpec is what a container's mount namespace holds (docs/containers.md, "The container").
type NSSpec struct {
	// RootFS is the unpacked image. It is never written: a writable container gets an
	// overlay whose upper layer is in Dir.
	RootFS string
	// Dir is the container's own directory: root/ (where the root is assembled), upper/ and
	// work/ (the writable layer), passwd and group, and mntns, the namespace's file.
	Dir      string
	Writable bool
	Job      Job
	// User and Group are the user's passwd line and primary group's line (getent), added to
	// the image's /etc/passwd and /etc/group.
	User, Group string
	// Mounts are the user's --container-mounts: their sources are opened as the user.
	Mounts []Mount
}

// NSFile is the file under Dir that keeps the namespace; the plugin setns()es into it.
const NSFile = "mntns"

// CreateNS builds the container's mount namespace in a child (exe ns-init, see NSInit) and
// pins it on Dir/mntns, so that it lives without a process. exe is this program.
func CreateNS(exe string, spec NSSpec) (string, error) {
	// The overlay's root takes the upper layer's mode: 0755, or users could not enter it.
	for d, mode := range map[string]os.FileMode{"root": 0o755, "upper": 0o755, "work": 0o700} {
		if err := os.MkdirAll(filepath.Join(spec.Dir, d), mode); err != nil {
			return "", err
		}
	}
	// Binding a mount namespace's file is refused where the bind would propagate into that
	// namespace (a loop): Dir becomes a private mount of its own first.
	if err := unix.Mount(spec.Dir, spec.Dir, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind %s: %w", spec.Dir, err)
	}
	if err := unix.Mount("", spec.Dir, "", unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make %s private: %w", spec.Dir, err)
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	// The helper must run in a mount namespace made long before the container's (on a node:
	// the pod's). The kernel refuses, with EINVAL, to bind a namespace's file into one whose
	// id is not lower (mnt_ns_loop), and ids come in per-CPU batches: run under a fresh
	// `unshare --mount`, the bind below failed about half the time (kernel 6.18), retries or not.
	cmd := exec.Command(exe, "ns-init")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	// The child reads the spec, builds the root, says "ready" and waits for stdin to close:
	// its namespace must still exist when it is bound.
	_, _ = stdin.Write(append(in, '\n'))
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	nsPath := filepath.Join(spec.Dir, NSFile)
	var bindErr error
	if line == "ready\n" {
		if f, err := os.OpenFile(nsPath, os.O_CREATE|os.O_RDONLY, 0o600); err != nil {
			bindErr = err
		} else {
			f.Close()
			src := fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid)
			if err := unix.Mount(src, nsPath, "", unix.MS_BIND, ""); err != nil {
				bindErr = fmt.Errorf("pin the container's namespace: %w", err)
				_ = os.Remove(nsPath)
			}
		}
	}
	stdin.Close()
	waitErr := cmd.Wait()
	switch {
	case line != "ready\n":
		return "", childError(stderr.String(), waitErr)
	case bindErr != nil:
		return "", bindErr
	}
	return nsPath, nil
}

// childError is the last line the child wrote, else how it ended.
func childError(stderr string, waitErr error) error {
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); lines[len(lines)-1] != "" {
		return errors.New(strings.TrimPrefix(lines[len(lines)-1], "sunk-container: "))
	}
	return fmt.Errorf("preparing the container failed: %v", waitErr)
}

// RemoveNS unpins the namespace and deletes Dir. The namespace (and the overlay in it) goes
// once no task is left in it.
func RemoveNS(dir string) error {
	for _, p := range []string{filepath.Join(dir, NSFile), dir} {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return os.RemoveAll(dir)
}

// NSInit runs in the child CreateNS starts, in its new mount namespace: it assembles the root
// under Dir/root, pivots into it, writes "ready" and waits until in is closed.
func NSInit(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	var s NSSpec
	if err := json.Unmarshal(line, &s); err != nil {
		return err
	}
	// Nothing done here may reach the pod's mounts.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The user's sources are opened first, as the user, while the pod's paths are visible.
	trees, err := openUserMounts(s)
	if err != nil {
		return err
	}
	root := filepath.Join(s.Dir, "root")
	if s.Writable {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", s.RootFS, filepath.Join(s.Dir, "upper"), filepath.Join(s.Dir, "work"))
		if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("overlay on the image: %w", err)
		}
	} else {
		if err := unix.Mount(s.RootFS, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind the image: %w", err)
		}
		if err := unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("make the image read-only: %w", err)
		}
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootFD)
	// The node's mounts: /proc and /dev as the pod has them (a job outside a container sees
	// the same), /sys read-only, a private /tmp.
	for _, m := range []struct {
		src, dst string
		attr     uint64
	}{
		{"/proc", "/proc", unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC},
		{"/sys", "/sys", unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_RDONLY},
		{"/dev", "/dev", unix.MOUNT_ATTR_NOSUID},
	} {
		t, err := cloneTree(unix.AT_FDCWD, m.src, m.attr)
		if err != nil {
			return err
		}
		if err := moveInto(rootFD, t, m.dst, s.Writable, true); err != nil {
			return err
		}
	}
	if err := mountTmpfs(rootFD, "/tmp", s.Writable); err != nil {
		return err
	}
	if err := bindEtc(rootFD, s); err != nil {
		return err
	}
	for i, m := range s.Mounts {
		if err := moveInto(rootFD, trees[i], m.Target, s.Writable, true); err != nil {
			return fmt.Errorf("--container-mounts: %s: %w", m.Target, err)
		}
	}
	// pivot_root(".", ".") stacks the old root under the new one; unmounting it leaves the
	// image as the only root this namespace has (pivot_root(2)).
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the pod's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if _, err := io.WriteString(out, "ready\n"); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, r)
	return nil
}

// openUserMounts opens each --container-mounts source as the user (fsuid, fsgid and groups
// of one OS thread, which is then thrown away) and clones it, nosuid and nodev (read-only
// when asked), as a detached mount tree. Opening as the user means the user could reach the
// path: a bind made by root alone would skip the search permission of its directories.
func openUserMounts(s NSSpec) ([]int, error) {
	type result struct {
		fds []int
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread's credentials are the user's, so the runtime ends the
		// thread with this goroutine.
		runtime.LockOSThread()
		var res result
		defer func() { done <- res }()
		gids := append([]uint32{s.Job.GID}, s.Job.GIDs...)
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gids)), uintptr(unsafe.Pointer(&gids[0])), 0); e != 0 {
			res.err = fmt.Errorf("setgroups: %w", e)
			return
		}
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(s.Job.GID), 0, 0)
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(s.Job.UID), 0, 0)
		for _, m := range s.Mounts {
			fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				res.err = fmt.Errorf("--container-mounts: %s: %w", m.Source, err)
				return
			}
			res.fds = append(res.fds, fd)
		}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	trees := make([]int, len(r.fds))
	for i, fd := range r.fds {
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if s.Mounts[i].ReadOnly {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		t, err := cloneTree(fd, "", attr)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("--container-mounts: %s: %w", s.Mounts[i].Source, err)
		}
		trees[i] = t
	}
	return trees, nil
}

// cloneTree is a detached copy of the mounts at dirfd/path (path "" means dirfd itself),
// recursive, with attr set on every mount of it.
func cloneTree(dirfd int, path string, attr uint64) (int, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_RECURSIVE)
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	t, err := unix.OpenTree(dirfd, path, flags)
	if err != nil {
		return -1, fmt.Errorf("clone %s: %w", path, err)
	}
	if err := unix.MountSetattr(t, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
		unix.Close(t)
		return -1, fmt.Errorf("set nosuid,nodev on %s: %w", path, err)
	}
	return t, nil
}

// resolveIn opens path inside the container's root: symbolic links resolve as if root were
// "/", and /proc's magic links are refused, so a hostile image cannot point a mount (or a
// directory the helper creates) at the pod's own files. With create (writable containers),
// missing directories are made.
func resolveIn(rootFD int, path string, create, dir bool) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(rootFD, path, how)
	if err == nil || !errors.Is(err, unix.ENOENT) || !create {
		if err != nil {
			return -1, fmt.Errorf("%s in the image: %w", path, err)
		}
		return fd, nil
	}
	parent, err := resolveIn(rootFD, filepath.Dir(path), true, true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	name := filepath.Base(path)
	if dir {
		err = unix.Mkdirat(parent, name, 0o755)
	} else {
		var f int
		if f, err = unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644); err == nil {
			unix.Close(f)
		}
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("create %s in the image: %w", path, err)
	}
	return resolveIn(rootFD, path, false, dir)
}

// moveInto attaches the detached tree t at path inside the container's root.
func moveInto(rootFD, t int, path string, create, dir bool) error {
	defer unix.Close(t)
	fd, err := resolveIn(rootFD, path, create, dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(t, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount on %s: %w", path, err)
	}
	return nil
}

func mountTmpfs(rootFD int, path string, create bool) error {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "1777"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	t, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	return moveInto(rootFD, t, path, create, true)
}
