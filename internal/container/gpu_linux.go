package container

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// nativeABI is ldconfig's tag for libraries of the node's own architecture.
var nativeABI = map[string]string{"amd64": "libc6,x86-64", "arm64": "libc6,AArch64"}[runtime.GOARCH]

// driverFiles finds the GPU driver's files under root (DriverMounts' inputs): the libraries of
// root's ldconfig cache, as nvidia-container-cli reads it (the NVIDIA toolkit ran ldconfig
// after putting the driver into the compute pod), and which driver programs exist. A node
// without a cache has no libraries to give.
func driverFiles(root string) ([]LibEntry, []string, error) {
	var libs []LibEntry
	cache := filepath.Join(root, "etc/ld.so.cache")
	if _, err := os.Stat(cache); err == nil {
		out, err := exec.Command("ldconfig", "-p", "-C", cache).Output()
		if err != nil {
			return nil, nil, fmt.Errorf("ldconfig -p -C %s: %w", cache, err)
		}
		libs = ParseLdconfig(string(out))
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	var bins []string
	for _, b := range driverBins {
		if st, err := os.Stat(filepath.Join(root, b)); err == nil && st.Mode().IsRegular() {
			bins = append(bins, b)
		}
	}
	return libs, bins, nil
}

// gpuMounts are the node's driver files for the step's container (DriverMounts), none for a
// step without GPUs.
func gpuMounts(a Args) ([]Mount, error) {
	gpus := StepGPUs(a.Job.GPUEnv)
	if gpus == "" {
		return nil, nil
	}
	libs, bins, err := driverFiles(a.DriverRoot)
	if err != nil {
		return nil, fmt.Errorf("the node's GPU driver: %w", err)
	}
	return DriverMounts(gpus, libs, nativeABI, bins, a.DriverRoot), nil
}
