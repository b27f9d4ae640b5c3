package slurmimage

import (
	"os/exec"
	"testing"
)

// TestNodeWatchC runs the C tests of sunk-slurm-nodes' Slurm-free part (nodewatch/jsonline.c:
// the JSON lines pkg/nodewatch reads). The program itself needs the slurm.h and libslurmfull of
// the release that runs it (hack/nodewatch.sh; test/integration/nodewatch runs it).
func TestNodeWatchC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatalf("no C compiler: %v (sunk-slurm-nodes is C; install gcc)", err)
	}
	out, err := exec.Command("make", "-C", "nodewatch", "CC="+cc, "OUT="+t.TempDir(), "check").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
}
