package container

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Job is what slurmstepd knows about the step, handed on by the SPANK plugin (spank_get_item
// in slurm_spank_init_post_opt): the helper runs as root and must not take a user's word
// for who the user is, so these come from Slurm, never from the job's environment.
type Job struct {
	JobID, StepID uint64
	UID, GID      uint32
	// GIDs are the user's supplementary groups (S_JOB_SUPPLEMENTARY_GIDS).
	GIDs []uint32
	// GPUEnv are the step's variables that name its GPUs (gpuEnv: SLURM_STEP_GPUS, ...), as
	// slurmstepd set them; StepGPUs reads them.
	GPUEnv map[string]string
	// BatchScript is the batch step's script (S_JOB_ARGV[0], in slurmd's spool directory):
	// slurmstepd execs it by that path after the task entered the container, so the container
	// must show it there (Pyxis binds it the same way). Empty for other steps.
	BatchScript string
}

// Mount is one entry of --container-mounts.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// Options are the Pyxis flags of one step (docs/containers.md, "The flags"). Tri-state flags
// (a --x and its --no-x) are nil when the user gave neither; the node's defaults decide then.
type Options struct {
	Image     *Image
	Mounts    []Mount
	Workdir   string
	Name      string
	NameFlags string // auto (default), create, exec, no_exec: Pyxis's
	MountHome *bool
	RemapRoot *bool
	Entry     *bool // --[no-]container-entrypoint
	Writable  *bool // --container-writable (true) / --container-readonly (false)
	Env       []string
}

// Args are a parsed helper command line: the job facts, the step's options, and the node's
// settings (never a user's: the plugin does not pass them).
type Args struct {
	Job  Job
	Opts Options
	// StateDir holds each container's directory (StateDir/JOB/NAME). Not on an overlay
	// filesystem: a writable container's upper layer is there.
	StateDir string
	// RootFS is an unpacked image to use instead of pulling --container-image (tests).
	RootFS string
	// CacheDir is the node's image cache (Cache).
	CacheDir string
	// Insecure are registries reached over plain HTTP (--insecure-registry, the node's setting).
	Insecure []string
	// CacheMax bounds the image cache in bytes (--cache-max, the node's setting; 0: no bound).
	CacheMax int64
	// AuthDir holds the node's registry credentials (--auth-dir: dockerconfigjson files).
	AuthDir string
	// SpoolDir is slurmd's spool directory (--spool-dir, default DefaultSpoolDir), shown in
	// the container at its path: PMIx's sockets are there.
	SpoolDir string
	// DriverRoot is where the node's GPU driver files are (--driver-root, default "/"): its
	// etc/ld.so.cache and usr/bin (DriverMounts).
	DriverRoot string
}

// The compute pod's volumes for containers and images.
const (
	DefaultStateDir = "/var/lib/sunk/containers"
	DefaultCacheDir = "/var/lib/sunk/images"
	// DefaultSpoolDir is SlurmdSpoolDir of sunk's slurm.conf (and Debian's default).
	DefaultSpoolDir = "/var/spool/slurmd"
)

// Errors name the flag as the user wrote it (--container-mounts: ...), so that the one line
// the job's output shows says what to fix.
type flagError struct{ flag, msg string }

func (e *flagError) Error() string { return "--" + e.flag + ": " + e.msg }

func ferr(flag, format string, a ...any) error {
	return &flagError{flag, fmt.Sprintf(format, a...)}
}

// Unsupported are Pyxis flags sunk knows and refuses with a clear error rather than ignoring:
// a user who asks for them expects something sunk does not do yet (docs/containers.md, "Not yet").
var Unsupported = map[string]string{
	"container-save":           "saving a container to a squashfs file is not supported yet",
	"container-unshare":        "private network, IPC or UTS namespaces are not supported yet",
	"container-entrypoint-log": "", // accepted and ignored: it only says whether to print the entrypoint's output
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// envNameRE is a POSIX environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseArgs reads the helper's flags: --job-id, --step-id, --uid, --gid, --gids (from the
// plugin) and the Pyxis flags as --NAME=VALUE or --NAME, exactly as the user gave them.
// A flag given twice with the same value is one flag (Slurm may pass an option twice, Pyxis
// notes); with different values, or a --x beside its --no-x, it is an error.
func ParseArgs(argv []string) (Args, error) {
	a := Args{StateDir: DefaultStateDir, CacheDir: DefaultCacheDir, DriverRoot: "/", SpoolDir: DefaultSpoolDir}
	seen := map[string]string{}
	var haveJob, haveStep, haveUID, haveGID bool
	for _, arg := range argv {
		if !strings.HasPrefix(arg, "--") {
			return Args{}, fmt.Errorf("unexpected argument %q", arg)
		}
		name, val, hasVal := strings.Cut(arg[2:], "=")
		if prev, ok := seen[name]; ok && name != "container-mounts" && name != "container-env" && name != "insecure-registry" && name != "gpu-env" {
			if prev == val {
				continue
			}
			return Args{}, ferr(name, "given twice (%q and %q)", prev, val)
		}
		seen[name] = val
		needVal := func() error {
			if !hasVal || val == "" {
				return ferr(name, "argument required")
			}
			return nil
		}
		var err error
		switch name {
		case "job-id":
			a.Job.JobID, err = parseUint(name, val, 64)
			haveJob = true
		case "step-id":
			a.Job.StepID, err = parseUint(name, val, 64)
			haveStep = true
		case "uid", "gid":
			var n uint64
			if n, err = parseUint(name, val, 32); err == nil {
				if name == "uid" {
					a.Job.UID, haveUID = uint32(n), true
				} else {
					a.Job.GID, haveGID = uint32(n), true
				}
			}
		case "gids":
			for _, g := range strings.Split(val, ",") {
				if g == "" {
					continue
				}
				n, e := parseUint(name, g, 32)
				if e != nil {
					return Args{}, e
				}
				a.Job.GIDs = append(a.Job.GIDs, uint32(n))
			}
		case "batch-script":
			if err = needVal(); err == nil && !path.IsAbs(val) {
				err = ferr(name, "%q is not an absolute path", val)
			}
			a.Job.BatchScript = path.Clean(val)
		case "gpu-env":
			k, v, ok := strings.Cut(val, "=")
			known := false
			for _, n := range gpuEnv {
				known = known || n == k
			}
			if !ok || !known {
				return Args{}, ferr(name, "%q is not NAME=VALUE of %s", val, strings.Join(gpuEnv, ", "))
			}
			if a.Job.GPUEnv == nil {
				a.Job.GPUEnv = map[string]string{}
			}
			a.Job.GPUEnv[k] = v
		case "state-dir", "rootfs", "cache-dir", "auth-dir", "driver-root", "spool-dir":
			if err = needVal(); err == nil && !path.IsAbs(val) {
				err = ferr(name, "%q is not an absolute path", val)
			}
			switch name {
			case "state-dir":
				a.StateDir = path.Clean(val)
			case "cache-dir":
				a.CacheDir = path.Clean(val)
			case "auth-dir":
				a.AuthDir = path.Clean(val)
			case "driver-root":
				a.DriverRoot = path.Clean(val)
			case "spool-dir":
				a.SpoolDir = path.Clean(val)
			default:
				a.RootFS = path.Clean(val)
			}
		case "cache-max":
			var n uint64
			if n, err = parseUint(name, val, 63); err == nil {
				a.CacheMax = int64(n)
			}
		case "insecure-registry":
			if err = needVal(); err == nil {
				for _, r := range strings.Split(val, ",") {
					if !registryRE.MatchString(r) {
						return Args{}, ferr(name, "%q is not HOST[:PORT]", r)
					}
					a.Insecure = append(a.Insecure, r)
				}
			}
		case "container-image":
			if err = needVal(); err == nil {
				var img Image
				if img, err = ParseImage(val); err != nil {
					err = ferr(name, "%v", err)
				}
				a.Opts.Image = &img
			}
		case "container-mounts":
			if err = needVal(); err == nil {
				err = a.Opts.addMounts(val)
			}
		case "container-workdir":
			if err = needVal(); err == nil {
				if !path.IsAbs(val) {
					err = ferr(name, "%q is not an absolute path", val)
				}
				a.Opts.Workdir = path.Clean(val)
			}
		case "container-name":
			if err = needVal(); err == nil {
				err = a.Opts.setName(val)
			}
		case "container-env":
			if err = needVal(); err == nil {
				for _, e := range strings.Split(val, ",") {
					if !envNameRE.MatchString(e) {
						return Args{}, ferr(name, "%q is not a variable name", e)
					}
					a.Opts.Env = append(a.Opts.Env, e)
				}
			}
		case "container-mount-home", "no-container-mount-home":
			err = setTri(&a.Opts.MountHome, name, "container-mount-home", hasVal)
		case "container-remap-root", "no-container-remap-root":
			err = setTri(&a.Opts.RemapRoot, name, "container-remap-root", hasVal)
		case "container-entrypoint", "no-container-entrypoint":
			err = setTri(&a.Opts.Entry, name, "container-entrypoint", hasVal)
		case "container-writable", "container-readonly":
			err = setTri(&a.Opts.Writable, name, "container-writable", hasVal)
		default:
			msg, known := Unsupported[name]
			switch {
			case !known:
				err = fmt.Errorf("unknown flag --%s", name)
			case msg != "":
				err = ferr(name, "%s", msg)
			}
		}
		if err != nil {
			return Args{}, err
		}
	}
	switch {
	case !haveJob || !haveStep || !haveUID || !haveGID:
		return Args{}, fmt.Errorf("--job-id, --step-id, --uid and --gid are required (the SPANK plugin passes them)")
	case a.Opts.Image == nil && a.Opts.Name == "":
		return Args{}, fmt.Errorf("--container-image or --container-name is required")
	case a.Opts.Image != nil && a.Opts.Image.Path != "":
		return Args{}, ferr("container-image", "%q: squashfs files are not supported yet; name an image in a registry", a.Opts.Image.Path)
	}
	return a, nil
}

// setTri sets a --x / --no-x pair (or --container-writable / --container-readonly, whose
// "no" is readonly). base is the positive flag's name.
func setTri(p **bool, name, base string, hasVal bool) error {
	if hasVal {
		return ferr(name, "takes no argument")
	}
	v := name == base
	if *p != nil && **p != v {
		other := "no-" + base
		if base == "container-writable" {
			other = "container-readonly"
		}
		return fmt.Errorf("both --%s and --%s were given", base, other)
	}
	*p = &v
	return nil
}

func parseUint(name, s string, bits int) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, ferr(name, "%q is not a number", s)
	}
	return n, nil
}

// setName reads NAME[:FLAGS]; the name becomes part of a path on the node, hence the
// narrow alphabet.
func (o *Options) setName(v string) error {
	name, flags, _ := strings.Cut(v, ":")
	if !nameRE.MatchString(name) {
		return ferr("container-name", "%q: a name is 1-64 letters, digits, _ . - and does not start with . or -", name)
	}
	switch flags {
	case "":
		flags = "auto"
	case "auto", "create", "exec", "no_exec":
	default:
		return ferr("container-name", "flag %q: must be auto, create, exec or no_exec", flags)
	}
	o.Name, o.NameFlags = name, flags
	return nil
}

// addMounts reads SRC[:DST[:FLAGS]][,...], FLAGS joined by "+" (Pyxis's form). sunk supports
// bind mounts of absolute paths with ro or rw; every mount is nosuid and nodev whatever is
// asked (docs/containers.md, "Who runs what"), so those flags are accepted and change nothing.
func (o *Options) addMounts(v string) error {
	for _, entry := range strings.Split(v, ",") {
		parts := strings.Split(entry, ":")
		if len(parts) > 3 || parts[0] == "" {
			return ferr("container-mounts", "%q: expected SRC[:DST[:FLAGS]]", entry)
		}
		m := Mount{Source: parts[0], Target: parts[0]}
		if len(parts) > 1 {
			m.Target = parts[1]
		}
		for _, p := range []string{m.Source, m.Target} {
			if p == "tmpfs" || p == "umount" {
				return ferr("container-mounts", "%q: %s mounts are not supported yet", entry, p)
			}
			if !path.IsAbs(p) {
				return ferr("container-mounts", "%q: %q is not an absolute path", entry, p)
			}
		}
		m.Source, m.Target = path.Clean(m.Source), path.Clean(m.Target)
		if m.Target == "/" {
			return ferr("container-mounts", "%q: cannot mount over the container's root", entry)
		}
		if len(parts) == 3 && parts[2] != "" {
			for _, f := range strings.Split(parts[2], "+") {
				switch f {
				case "ro":
					m.ReadOnly = true
				case "rw":
					m.ReadOnly = false
				case "bind", "rbind", "private", "rprivate", "slave", "rslave", "nosuid", "nodev":
				default:
					return ferr("container-mounts", "%q: mount flag %q is not supported (ro, rw, rbind, rprivate, ...)", entry, f)
				}
			}
		}
		dup := false
		for _, have := range o.Mounts {
			if have.Target == m.Target {
				if have != m {
					return ferr("container-mounts", "%q: %s is already a mount target", entry, m.Target)
				}
				dup = true
			}
		}
		if !dup {
			o.Mounts = append(o.Mounts, m)
		}
	}
	return nil
}
