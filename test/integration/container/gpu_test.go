//go:build integration

package container_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sunk.dev/sunk/test/registry"
)

// TestGPUDriver: a step with GPUs gets the node's driver files in its container (read-only, at
// their paths on the node), a step without GPUs gets none of them. The driver is a fake one
// under a driver root of the test's (--driver-root): shared objects with the driver's sonames
// (gcc), an ldconfig cache made by ldconfig -r over them as the NVIDIA toolkit's hook makes
// it, and an nvidia-smi script; a library of the same cache that is not the driver's stays out.
func TestGPUDriver(t *testing.T) {
	dir, helper := helperBed(t)
	rootfs := registry.BusyboxRootFS(t, dir)
	drv := fakeDriver(t, filepath.Join(dir, "driver"))

	state := filepath.Join(dir, "state")
	job := func(step string, extra ...string) []string {
		return append([]string{"--job-id=8", "--step-id=" + step, "--uid=" + uid, "--gid=" + gid,
			"--state-dir=" + state, "--rootfs=" + rootfs, "--container-image=localhost:5000/test/busybox:1",
			"--driver-root=" + drv}, extra...)
	}
	var holders holders
	t.Cleanup(func() {
		holders.release()
		for _, step := range []string{"0", "1", "2", "3"} {
			if out, err := exec.Command(helper, append([]string{"remove"}, job(step)...)...).CombinedOutput(); err != nil {
				t.Errorf("remove step %s: %v %s", step, err, out)
			}
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mi), dir) {
			t.Errorf("mounts left under the test's directory:\n%s", grepLines(string(mi), dir))
		}
	})
	enter := func(ns, script string) string {
		t.Helper()
		out, _ := exec.Command("nsenter", append(enterArgs(ns), "-S", uid, "-G", gid, "sh", "-c", script)...).CombinedOutput()
		return string(out)
	}
	const libdir = "/usr/lib/x86_64-linux-gnu"
	probe := "for f in " + libdir + "/libcuda.so.1 " + libdir + "/libnvidia-ml.so.1 " + libdir + "/libfoo.so.1 /usr/bin/nvidia-smi; do " +
		"if [ -e $f ]; then echo have $f; else echo no $f; fi; done; /usr/bin/nvidia-smi 2>&1; " +
		"grep ' " + libdir + "/libcuda.so.1 ' /proc/self/mountinfo | cut -d' ' -f6"

	for _, tc := range []struct {
		step string
		env  []string
		want []string
	}{
		{"0", []string{"--gpu-env=SLURM_STEP_GPUS=0", "--gpu-env=CUDA_VISIBLE_DEVICES=0"}, []string{
			"have " + libdir + "/libcuda.so.1", "have " + libdir + "/libnvidia-ml.so.1", "no " + libdir + "/libfoo.so.1",
			"have /usr/bin/nvidia-smi", "fake nvidia-smi: driver 550.1", "ro,nosuid,nodev"}},
		{"1", []string{"--gpu-env=SLURM_JOB_GPUS=1"}, []string{"have " + libdir + "/libcuda.so.1", "fake nvidia-smi"}},
		{"2", nil, []string{"no " + libdir + "/libcuda.so.1", "no " + libdir + "/libnvidia-ml.so.1", "no /usr/bin/nvidia-smi"}},
	} {
		ns, err := holders.prepare(helper, job(tc.step, tc.env...)...)
		if err != nil {
			t.Fatalf("prepare step %s %v: %v", tc.step, tc.env, err)
		}
		got := enter(ns, probe)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("step %s %v: the container printed\n%s\nwant %q", tc.step, tc.env, got, w)
			}
		}
		if len(tc.env) == 0 && strings.Contains(got, "fake nvidia-smi") {
			t.Errorf("step %s without GPUs ran the node's nvidia-smi:\n%s", tc.step, got)
		}
	}
	// The libraries are the node's files: same bytes.
	ns, err := holders.prepare(helper, job("3", "--gpu-env=SLURM_STEP_GPUS=0")...)
	if err != nil {
		t.Fatalf("prepare step 3: %v", err)
	}
	want, _ := os.ReadFile(filepath.Join(drv, libdir, "libcuda.so.550.1"))
	if got := enter(ns, "cat "+libdir+"/libcuda.so.1"); got != string(want) || len(want) == 0 {
		t.Errorf("libcuda.so.1 in the container has %d bytes, the node's %d", len(got), len(want))
	}
}

// fakeDriver makes a driver root at root: libcuda.so.550.1 and libnvidia-ml.so.550.1 with the
// driver's sonames, libfoo.so.1 beside them, their ldconfig cache (ldconfig -r root: the
// cache names them by soname at their paths inside root) and usr/bin/nvidia-smi.
func fakeDriver(t *testing.T, root string) string {
	t.Helper()
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	must(t, os.MkdirAll(lib, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	src := filepath.Join(root, "x.c")
	must(t, os.WriteFile(src, []byte("int sunk_fake_driver;\n"), 0o644))
	for file, soname := range map[string]string{"libcuda.so.550.1": "libcuda.so.1", "libnvidia-ml.so.550.1": "libnvidia-ml.so.1", "libfoo.so.1.0": "libfoo.so.1"} {
		if out, err := exec.Command("gcc", "-shared", "-fPIC", "-Wl,-soname,"+soname, "-o", filepath.Join(lib, file), src).CombinedOutput(); err != nil {
			t.Fatalf("gcc (the fake driver's libraries): %v\n%s", err, out)
		}
	}
	must(t, os.WriteFile(filepath.Join(root, "etc/ld.so.conf"), []byte("/usr/lib/x86_64-linux-gnu\n"), 0o644))
	if out, err := exec.Command("ldconfig", "-r", root).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig -r: %v\n%s", err, out)
	}
	must(t, os.WriteFile(filepath.Join(root, "usr/bin/nvidia-smi"), []byte("#!/bin/sh\necho 'fake nvidia-smi: driver 550.1'\n"), 0o755))
	return root
}
