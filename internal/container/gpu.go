package container

import (
	"path"
	"strings"
)

// GPU steps get the node's NVIDIA driver in their container: the device nodes are there
// already (/dev is the node's and the job's cgroup decides which it may open), but the
// user-space half of the driver (libcuda, libnvidia-ml, nvidia-smi, ...) must match the
// node's kernel module, so it cannot come from the image. On a GPU node the NVIDIA container
// toolkit put those files into the compute pod and ran ldconfig there; the helper finds them
// as nvidia-container-cli does (the ldconfig cache of the driver root, and well-known paths
// for the programs) and binds each read-only at the same path in the container. Nothing else
// of the node, and nothing at all for a step without GPUs.

// gpuEnv are the step's variables that say which GPUs Slurm gave it, first the most precise:
// slurmstepd sets SLURM_STEP_GPUS for a step with GPUs (gres_g_step_set_env), SLURM_JOB_GPUS
// for the batch and interactive steps (gres_g_job_set_env), and CUDA_VISIBLE_DEVICES for both.
// The plugin passes those it finds (--gpu-env=NAME=VALUE).
var gpuEnv = []string{"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"}

// StepGPUs is the GPUs the step was allocated, from its variables (gpuEnv), or "" for none.
// "NoDevFiles" is what Slurm sets when the GPUs have no device files; it still means GPUs.
//
// These come from the step's environment, which a user can set where the node has no gres/gpu
// plugin to overwrite them. That is acceptable here, unlike for the job facts: all a false
// claim gains is read-only copies of node files the same user reads outside a container.
func StepGPUs(env map[string]string) string {
	for _, name := range gpuEnv {
		if v := strings.TrimSpace(env[name]); v != "" {
			return v
		}
	}
	return ""
}

// driverLibPrefixes are the names (up to ".so") of the NVIDIA driver's libraries: what
// nvidia-container-cli injects for the compute, utility, video and graphics capabilities.
var driverLibPrefixes = []string{
	"libcuda", "libcudadebugger", "libnvidia-", "libnvcuvid", "libnvoptix",
	"libGLX_nvidia", "libEGL_nvidia", "libGLESv2_nvidia", "libGLESv1_CM_nvidia", "libvdpau_nvidia",
}

// driverBins are the driver's programs, in the directory the toolkit puts them.
var driverBins = []string{
	"/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump", "/usr/bin/nvidia-persistenced",
	"/usr/bin/nvidia-cuda-mps-control", "/usr/bin/nvidia-cuda-mps-server",
}

// LibEntry is one line of `ldconfig -p`: a library's name (its soname or link name), the
// ABI tag in parentheses, and its path.
type LibEntry struct {
	Name, ABI, Path string
}

// ParseLdconfig reads `ldconfig -p` output; lines it cannot read are skipped (its header).
func ParseLdconfig(out string) []LibEntry {
	var es []LibEntry
	for _, l := range strings.Split(out, "\n") {
		left, p, ok := strings.Cut(strings.TrimSpace(l), " => ")
		if !ok {
			continue
		}
		name, abi, ok := strings.Cut(left, " (")
		if !ok || !path.IsAbs(p) {
			continue
		}
		es = append(es, LibEntry{Name: name, ABI: strings.TrimSuffix(abi, ")"), Path: p})
	}
	return es
}

// DriverMounts decides which node files a step's container gets for its GPUs: none without
// GPUs (gpus ""); else every library of the cache whose name is the driver's and whose ABI is
// the node's own (abi, e.g. "libc6,x86-64": 32-bit copies are not wanted), and every driver
// program that exists (bins, of driverBins). Each is mounted read-only at the path it has on
// the node; root is the driver root the paths are relative to ("/" on a node). Duplicates
// (one library under two names at one path) are mounted once.
func DriverMounts(gpus string, libs []LibEntry, abi string, bins []string, root string) []Mount {
	if gpus == "" {
		return nil
	}
	var ms []Mount
	seen := map[string]bool{}
	add := func(p string) {
		p = path.Clean(p)
		if seen[p] || p == "/" {
			return
		}
		seen[p] = true
		ms = append(ms, Mount{Source: path.Join(root, p), Target: p, ReadOnly: true})
	}
	for _, e := range libs {
		if isDriverLib(e.Name) && (e.ABI == abi || strings.HasPrefix(e.ABI, abi+",")) {
			add(e.Path)
		}
	}
	for _, b := range bins {
		for _, want := range driverBins {
			if b == want {
				add(b)
			}
		}
	}
	return ms
}

// isDriverLib says whether a library's name is one of the driver's (libcuda.so.1 is,
// libcudart.so.12, the CUDA toolkit's runtime that images bring, is not).
func isDriverLib(name string) bool {
	base, _, ok := strings.Cut(name, ".so")
	if !ok {
		return false
	}
	for _, p := range driverLibPrefixes {
		if strings.HasSuffix(p, "-") && strings.HasPrefix(base, p) || base == p {
			return true
		}
	}
	return false
}
