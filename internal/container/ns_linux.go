package container

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// NSSpec is what a container's mount namespace holds (docs/containers.md, "The container").
type NSSpec struct {
	// RootFS is the unpacked image. It is never written: a writable container gets an
	// overlay whose upper layer is in Dir.
	RootFS string
	// Dir is the container's own directory: root/ (where the root is assembled), upper/ and
	// work/ (the writable layer), passwd and group.
	Dir      string
	Writable bool
	Job      Job
	// User is the user's passwd line and Groups the lines of the user's groups (getent), put
	// into the image's /etc/passwd and /etc/group.
	User   string
	Groups []string
	// Mounts are the user's --container-mounts: their sources are opened as the user.
	Mounts []Mount
	// Entrypoint is the image's entrypoint, run once here (--container-entrypoint, a new
	// container), with Env, the image's environment.
	Entrypoint []string
	Env        []string
	// SpoolDir is slurmd's spool directory, shown at its path (MPI, bindSpool).
	SpoolDir string
	// NodeFiles are node files bound read-only at their targets, opened as root: the GPU
	// driver's, for a step with GPUs (gpuMounts).
	NodeFiles []Mount
}

// CreateNS starts the container's holder: a child of this program (exe ns-init, NSInit) in a
// mount namespace of its own, which assembles the container's root there and then keeps the
// namespace alive until its standard input, inherited from this process, reaches end of file.
// The plugin holds the other end of that pipe for as long as the step runs and enters the
// namespace through /proc/PID/ns/mnt; slurmstepd ending, however it ends, closes the pipe.
//
// A process holds the namespace, not a bind mount of its nsfs file: Linux refuses (EINVAL) to
// bind a mount namespace's file into a namespace whose id is not lower than the bound one's
// (mnt_ns_loop), and since ids are handed out in per-CPU batches (6.x) a namespace made later
// may have the lower id; the bind failed that way on a real slurmd.
//
// lock (the container's directory lock, lockDir) is inherited by the holder, so a named
// container is not mounted by two steps at once. CreateNS returns the holder's pid.
func CreateNS(exe string, spec NSSpec, lock *os.File) (int, error) {
	// The overlay's root takes the upper layer's mode: 0755, or users could not enter it.
	for d, mode := range map[string]os.FileMode{"root": 0o755, "upper": 0o755, "work": 0o700} {
		if err := os.MkdirAll(filepath.Join(spec.Dir, d), mode); err != nil {
			return 0, err
		}
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer specR.Close()
	cmd := exec.Command(exe, "ns-init")
	// Its own session: no signal meant for the helper's process group reaches the holder.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS, Setsid: true}
	cmd.Stdin = os.Stdin
	cmd.ExtraFiles = []*os.File{specR, lock} // fd 3: the spec; fd 4: held until the holder ends
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		specW.Close()
		return 0, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		specW.Close()
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		specW.Close()
		return 0, err
	}
	_, _ = specW.Write(in)
	specW.Close()
	// The holder says "ready" once the root is assembled, then lets go of stdout and stderr
	// (the plugin reads this helper's output until end of file; the holder outlives it).
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		msg, _ := io.ReadAll(io.LimitReader(stderr, 64<<10))
		return 0, childError(string(msg), cmd.Wait())
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

// childError is the last line the child wrote, else how it ended.
func childError(stderr string, waitErr error) error {
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); lines[len(lines)-1] != "" {
		return errors.New(strings.TrimPrefix(lines[len(lines)-1], "sunk-container: "))
	}
	return fmt.Errorf("preparing the container failed: %v", waitErr)
}

// NSInit is the holder CreateNS starts, in its new mount namespace: it reads the spec from
// specIn, assembles the root under Dir/root, pivots into it, writes "ready" on stdout, closes
// its stdout and stderr and waits until hold (its stdin) reaches end of file.
func NSInit(specIn io.Reader, hold io.Reader) error {
	var s NSSpec
	if err := json.NewDecoder(specIn).Decode(&s); err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	// Nothing done here may reach the pod's mounts.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The user's sources are opened first, as the user, while the pod's paths are visible.
	trees, dirs, err := openUserMounts(s)
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
		if err := moveInto(rootFD, trees[i], m.Target, s.Writable, dirs[i]); err != nil {
			return fmt.Errorf("--container-mounts: %s: %w", m.Target, err)
		}
	}
	for _, m := range s.NodeFiles {
		t, err := cloneTree(unix.AT_FDCWD, m.Source, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_RDONLY)
		if err != nil {
			return fmt.Errorf("the node's GPU driver: %w", err)
		}
		if err := moveInto(rootFD, t, m.Target, s.Writable, false); err != nil {
			return fmt.Errorf("the node's GPU driver: %w", err)
		}
	}
	if err := bindSpool(rootFD, s); err != nil {
		return fmt.Errorf("slurmd's spool directory %s: %w", s.SpoolDir, err)
	}
	if s.Job.BatchScript != "" {
		// slurmstepd execs the batch script by its path in slurmd's spool directory.
		if err := bindFile(rootFD, s.Job.BatchScript, s.Job.BatchScript, s.Writable); err != nil {
			return fmt.Errorf("the batch script %s: %w", s.Job.BatchScript, err)
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
	if err := runEntrypoint(s); err != nil {
		return err
	}
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return err
	}
	// /dev/null of the container (the pod's /dev): the helper's pipes must close.
	if null, err := os.OpenFile("/dev/null", os.O_RDWR, 0); err == nil {
		_ = unix.Dup2(int(null.Fd()), 1)
		_ = unix.Dup2(int(null.Fd()), 2)
		null.Close()
	}
	_, _ = io.Copy(io.Discard, hold)
	return nil
}

// openUserMounts opens each --container-mounts source as the user (fsuid, fsgid and groups
// of one OS thread, which is then thrown away) and clones it, nosuid and nodev (read-only
// when asked), as a detached mount tree, and says whether it is a directory (a missing target
// is made as what its source is). Opening as the user means the user could reach the path: a
// bind made by root alone would skip the search permission of its directories.
func openUserMounts(s NSSpec) (trees []int, dirs []bool, err error) {
	var fds []int
	err = asUser(s.Job, func() error {
		for _, m := range s.Mounts {
			fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("--container-mounts: %s: %w", m.Source, err)
			}
			fds = append(fds, fd)
		}
		return nil
	})
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	trees, dirs = make([]int, len(fds)), make([]bool, len(fds))
	for i, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, nil, fmt.Errorf("--container-mounts: %s: %w", s.Mounts[i].Source, err)
		}
		dirs[i] = st.Mode&unix.S_IFMT == unix.S_IFDIR
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if s.Mounts[i].ReadOnly {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		t, err := cloneTree(fd, "", attr)
		unix.Close(fd)
		if err != nil {
			return nil, nil, fmt.Errorf("--container-mounts: %s: %w", s.Mounts[i].Source, err)
		}
		trees[i] = t
	}
	return trees, dirs, nil
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

// bindSpool shows slurmd's spool directory in the container at its path, nosuid and nodev, as
// the node has it (its modes keep other jobs' files from the user, as outside a container):
// an MPI step's tasks reach slurmstepd there. mpi/pmix's server directory
// SPOOL/pmix.JOB.STEP (PMIX_SERVER_TMPDIR) is made after this, and the bind shows it since it
// is the node's directory; mpi/pmi2 needs nothing of it (PMI_FD is a descriptor the task
// inherits). A node without the directory, or a read-only container whose image lacks the
// path, gets no bind (docs/containers.md).
func bindSpool(rootFD int, s NSSpec) error {
	if s.SpoolDir == "" {
		return nil
	}
	if _, err := os.Stat(s.SpoolDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if !s.Writable {
		fd, err := resolveIn(rootFD, s.SpoolDir, false, true)
		if err != nil {
			return nil
		}
		unix.Close(fd)
	}
	t, err := cloneTree(unix.AT_FDCWD, s.SpoolDir, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return err
	}
	return moveInto(rootFD, t, s.SpoolDir, s.Writable, true)
}
