package slurmimage

import (
	"os/exec"
	"testing"
)

// TestSpankPluginHelperC runs the C tests of the SPANK plugin's Slurm-free parts
// (spank/test_helper.c: the flags' form, running the helper, its output). The plugin itself
// needs Slurm's spank.h and is built with the image (docs/containers.md).
func TestSpankPluginHelperC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatalf("no C compiler: %v (the SPANK plugin is C; install gcc)", err)
	}
	out, err := exec.Command("make", "-C", "spank", "CC="+cc, "OUT="+t.TempDir(), "check").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
}
