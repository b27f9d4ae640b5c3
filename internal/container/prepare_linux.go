package container

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is the container's directory: per job, named by --container-name or else by the step.
func (a Args) Dir() string {
	name := a.Opts.Name
	if name == "" {
		name = "step-" + strconv.FormatUint(a.Job.StepID, 10)
	} else {
		// A user's name never collides with a step's: names cannot hold "/" and steps'
		// directories are "step-N"; a named container gets a prefix of its own.
		name = "name-" + name
	}
	return filepath.Join(a.StateDir, strconv.FormatUint(a.Job.JobID, 10), name)
}

// lockWait bounds how long a step waits for its named container while another step of the
// job holds it: the step before, whose slurmstepd may still be ending after srun returned.
const lockWait = 60 * time.Second

// imageFile, in a container's directory, names the unpacked image its writable layer sits on:
// a later step reusing a named container gets the same image under its layer.
const imageFile = "image"

// Prepared is what the plugin needs of a prepared container.
type Prepared struct {
	// Holder is /proc/PID of the holder: the plugin enters PID's mount namespace and root.
	Holder string
	// Environ is the image's environment (environFile's format) for the tasks.
	Environ string
}

// environName, in a container's directory, is the image's environment for its tasks.
const environName = "environ"

// Prepare makes the step's container, or a named one's next use, and starts its holder
// (CreateNS). exe is this program, run again as the holder.
func Prepare(exe string, a Args) (p Prepared, err error) {
	dir := a.Dir()
	if err := mkdirTrusted(dir, 0o755); err != nil {
		return Prepared{}, err
	}
	lock, err := lockDir(dir, lockWait)
	if err != nil {
		if a.Opts.Name != "" {
			return Prepared{}, ferr("container-name", "%s: %v", a.Opts.Name, err)
		}
		return Prepared{}, err
	}
	defer lock.Close() // the holder has its own copy
	recorded, rerr := os.ReadFile(filepath.Join(dir, imageFile))
	exists := rerr == nil
	defer func() {
		// A container that could not be made leaves nothing behind.
		if err != nil && !exists {
			_ = os.RemoveAll(dir)
			_ = os.Remove(filepath.Dir(dir))
		}
	}()
	if a.Opts.Name != "" {
		switch {
		case exists && a.Opts.NameFlags == "create":
			return Prepared{}, ferr("container-name", "%s exists already (flag create)", a.Opts.Name)
		case !exists && (a.Opts.NameFlags == "exec" || a.Opts.NameFlags == "no_exec"):
			return Prepared{}, ferr("container-name", "no container %s in this job (flag %s)", a.Opts.Name, a.Opts.NameFlags)
		case !exists && a.Opts.Image == nil:
			return Prepared{}, ferr("container-name", "no container %s in this job, and no --container-image to make it", a.Opts.Name)
		}
	}
	user := getent("passwd", a.Job.UID)
	rootfs := string(recorded)
	switch {
	case exists:
		// A named container keeps the image it was made from, as under Pyxis.
	case a.RootFS != "":
		rootfs = a.RootFS
	default:
		cache := Cache{Dir: a.CacheDir, Insecure: a.Insecure, Max: a.CacheMax, StateDir: a.StateDir,
			Auth: Auth{NodeDir: a.AuthDir, Job: a.Job, Home: homeOf(user)}}
		if rootfs, err = cache.Unpacked(*a.Opts.Image, dir); err != nil {
			return Prepared{}, ferr("container-image", "%v", err)
		}
	}
	spec := NSSpec{
		RootFS:   rootfs,
		Dir:      dir,
		Writable: a.Opts.Writable == nil || *a.Opts.Writable,
		Job:      a.Job,
		SpoolDir: a.SpoolDir,
		User:     user,
		Mounts:   a.Opts.Mounts,
	}
	if a.Opts.MountHome != nil && *a.Opts.MountHome {
		// The home directory the cluster gives the user, at the same path, opened as the user.
		home := homeOf(user)
		if home == "" {
			return Prepared{}, ferr("container-mount-home", "uid %d has no home directory on this node", a.Job.UID)
		}
		spec.Mounts = append(spec.Mounts, Mount{Source: home, Target: home})
	}
	for _, gid := range append([]uint32{a.Job.GID}, a.Job.GIDs...) {
		if g := getent("group", gid); g != "" {
			spec.Groups = append(spec.Groups, g)
		}
	}
	if a.Opts.Entry != nil && *a.Opts.Entry && !exists {
		// Once per container: when it is made, not for a named container's later steps.
		if spec.Entrypoint, err = ImageEntrypoint(rootfs); err != nil {
			return Prepared{}, ferr("container-entrypoint", "the image's entrypoint: %v", err)
		}
		if spec.Env, err = ImageEnv(rootfs); err != nil {
			return Prepared{}, ferr("container-image", "the image's environment: %v", err)
		}
	}
	if spec.NodeFiles, err = gpuMounts(a); err != nil {
		return Prepared{}, err
	}
	pid, err := CreateNS(exe, spec, lock)
	if err != nil {
		return Prepared{}, err
	}
	if a.Opts.Name == "" {
		startReaper(exe, dir)
	}
	if !exists {
		env, err := ImageEnv(rootfs)
		if err != nil {
			return Prepared{}, ferr("container-image", "the image's environment: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, environName), environFile(env), 0o644); err != nil {
			return Prepared{}, err
		}
		// Last: its presence says the container exists (a later step of a named one).
		if err := os.WriteFile(filepath.Join(dir, imageFile), []byte(rootfs), 0o644); err != nil {
			return Prepared{}, err
		}
	}
	return Prepared{Holder: fmt.Sprintf("/proc/%d", pid), Environ: filepath.Join(dir, environName)}, nil
}

// Remove deletes the container Args name (a named one, or the step's), once its holder has
// ended: the holder keeps the directory's lock while the step runs.
func Remove(a Args) error { return removeLocked(a.Dir(), lockWait) }

// RemoveJob deletes every container of a job (the job's epilog: named containers stay until
// then), each once no step holds it.
func RemoveJob(stateDir string, jobID uint64) error {
	jobDir := filepath.Join(stateDir, strconv.FormatUint(jobID, 10))
	// Nothing is read below a directory a job could have changed (trust_linux.go).
	if err := trustedDir(jobDir); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	entries, err := os.ReadDir(jobDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(jobDir, e.Name())
		lock, err := lockDir(dir, lockWait)
		if errors.Is(err, os.ErrNotExist) {
			continue // a reaper was quicker
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
		lock.Close()
	}
	_ = os.Remove(jobDir)
	return errors.Join(errs...)
}

// startReaper starts `exe reap DIR` (Reap), detached: it removes an unnamed container once its
// step ended. Not slurm_spank_exit's work: slurmstepd's children are signalled as the step's
// job ends (slurmd's terminate request signals every descendant of slurmstepd with
// proctrack/linuxproc), and a remove run from there was killed half way. By the time the step
// ends the reaper is no descendant of slurmstepd: this helper has exited and it was reparented.
func startReaper(exe, dir string) {
	cmd := exec.Command(exe, "reap", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		_ = cmd.Process.Release()
	}
}

// Reap waits for the container at dir to be let go (its holder ended and with it the lock),
// then deletes it. A failure leaves the directory to the job's epilog.
func Reap(dir string) error { return removeLocked(dir, 0) }

// removeLocked deletes the container directory dir once it holds its lock (lockDir with wait);
// a directory already gone is no error.
func removeLocked(dir string, wait time.Duration) error {
	if err := trustedDir(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	lock, err := lockDir(dir, wait)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// The job's directory goes with its last container.
	_ = os.Remove(filepath.Dir(dir))
	return nil
}

// lockDir takes the exclusive flock of dir/lock, waiting at most wait (0: as long as it takes).
func lockDir(dir string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if wait == 0 {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	done := make(chan error, 1)
	go func() { done <- unix.Flock(int(f.Fd()), unix.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	case <-time.After(wait):
		// The blocked flock ends with this short-lived process.
		return nil, fmt.Errorf("still in use by another step of this job after %v", wait)
	}
}

// homeOf is the home directory of a passwd line, "" if it names none.
func homeOf(passwd string) string {
	f := strings.Split(passwd, ":")
	if len(f) < 6 || !filepath.IsAbs(f[5]) {
		return ""
	}
	return f[5]
}

// getent is the NSS entry of id (files, sssd: whatever the pod resolves), or "".
func getent(db string, id uint32) string {
	out, err := exec.Command("getent", db, strconv.FormatUint(uint64(id), 10)).Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}
