package container

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// Prepare makes (or, for a named container that exists, finds) the step's container and
// returns its namespace file. exe is this program, run again as the namespace's builder.
func Prepare(exe string, a Args) (string, error) {
	dir := a.Dir()
	ns := filepath.Join(dir, NSFile)
	if a.Opts.Name != "" {
		_, err := os.Stat(ns)
		switch exists := err == nil; {
		case exists && a.Opts.NameFlags == "create":
			return "", ferr("container-name", "%s exists already (flag create)", a.Opts.Name)
		case exists:
			return ns, nil
		case a.Opts.NameFlags == "exec" || a.Opts.NameFlags == "no_exec":
			return "", ferr("container-name", "no container %s in this job (flag %s)", a.Opts.Name, a.Opts.NameFlags)
		}
		if a.Opts.Image == nil {
			return "", ferr("container-name", "no container %s in this job, and no --container-image to make it", a.Opts.Name)
		}
	}
	rootfs := a.RootFS
	if rootfs == "" {
		var err error
		if rootfs, err = (Cache{Dir: a.CacheDir, Insecure: a.Insecure}).Unpacked(*a.Opts.Image); err != nil {
			return "", ferr("container-image", "%v", err)
		}
	}
	spec := NSSpec{
		RootFS:   rootfs,
		Dir:      dir,
		Writable: a.Opts.Writable == nil || *a.Opts.Writable,
		Job:      a.Job,
		User:     getent("passwd", a.Job.UID),
		Group:    getent("group", a.Job.GID),
		Mounts:   a.Opts.Mounts,
	}
	path, err := CreateNS(exe, spec)
	if err != nil {
		_ = RemoveNS(dir)
		return "", err
	}
	return path, nil
}

// Remove deletes the container Args name (a named one, or the step's).
func Remove(a Args) error {
	return RemoveNS(a.Dir())
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
