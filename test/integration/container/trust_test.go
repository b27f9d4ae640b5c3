//go:build integration

package container_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/test/wait"
)

// plantedLinks plays, as the plain user alice through real slurmd and the plugin, the attack
// of a job on the helper's volume (/var/lib/sunk): plant STATE/JOB -> a root-only directory, so
// that the job's root epilog (remove-job) empties it. First on the volume as kubelet makes an
// emptyDir (0777, the node's start): the helper refuses every container there and deletes
// nothing. Then as the compute pod's entrypoint leaves it (root's, 0755): the job cannot plant
// anything, and containers work.
func plantedLinks(t *testing.T, n *node, image string) {
	t.Helper()
	if out, err := n.run("sh", "-c", "mkdir -p /srv/secret/keep && chmod 0700 /srv/secret"); err != nil {
		t.Fatalf("a root-only directory: %v\n%s", err, out)
	}
	secretKept := func(when string) {
		t.Helper()
		wait.For(t, "the node idle after the job ("+when+")", 30*time.Second, 200*time.Millisecond, func() error {
			return n.idle()
		})
		// Read in the node's mount namespace: its root is an overlay mounted there alone.
		if out, err := n.run("ls", "-A", "/srv/secret"); err != nil || out != "keep\n" {
			t.Errorf("%s: root's directory /srv/secret holds %q (%v), want keep alone: the helper deleted or made nothing through the job's link", when, out, err)
		}
	}

	// The emptyDir as kubelet made it. A job plants STATE/JOB -> /srv/secret and ends: its epilog's
	// remove-job, root, would empty /srv/secret through the link; it refuses instead.
	n.write(t, "/home/alice/plant.sh", "#!/bin/sh\n"+
		"mkdir -p /var/lib/sunk/containers && ln -s /srv/secret /var/lib/sunk/containers/$SLURM_JOB_ID && echo planted\n")
	out := n.user(t, "sbatch --wait -o /home/alice/plant.out /home/alice/plant.sh >/dev/null; cat /home/alice/plant.out")
	if out != "planted\n" {
		t.Errorf("a job planting a link in a 0777 /var/lib/sunk printed %q, want planted (the attack must be possible to be refused)", out)
	}
	secretKept("the volume at 0777, the job's epilog")
	// A container step there is refused, naming the directory.
	out, _ = n.userErr("srun --container-image=" + image + " echo step-ran 2>&1")
	if strings.Contains(out, "step-ran") || !strings.Contains(out, "/var/lib/sunk: writable by group or others (mode 0777)") {
		t.Errorf("a container step on a 0777 /var/lib/sunk printed %q, want it refused naming /var/lib/sunk", out)
	}
	secretKept("the volume at 0777")

	// What the compute pod's entrypoint does before slurmd starts.
	if out, err := n.run("sh", "-c", "rm -rf /var/lib/sunk/containers && chown root:root /var/lib/sunk && chmod 0755 /var/lib/sunk"); err != nil {
		t.Fatalf("the entrypoint's chmod: %v\n%s", err, out)
	}
	n.write(t, "/home/alice/plant2.sh", "#!/bin/sh\n"+
		"mkdir /var/lib/sunk/containers 2>/dev/null && echo made-state-dir\n"+
		"srun --container-image="+image+" echo step-ran\n"+
		"mv /var/lib/sunk/containers /var/lib/sunk/aside 2>/dev/null && echo moved\n"+
		"ln -s /srv/secret /var/lib/sunk/containers/$SLURM_JOB_ID 2>/dev/null && echo planted\n")
	out = n.user(t, "sbatch --wait -o /home/alice/plant2.out /home/alice/plant2.sh >/dev/null; cat /home/alice/plant2.out")
	if out != "step-ran\n" {
		t.Errorf("a job on a root-owned 0755 /var/lib/sunk printed %q, want its container step to run and every change of the volume refused", out)
	}
	secretKept("the volume at 0755")
}

// idle is nil once slurmd's node is idle: its jobs ended and their epilogs ran.
func (n *node) idle() error {
	state, err := n.run("sinfo", "-h", "-n", "c1", "-o", "%T")
	if strings.TrimSpace(state) != "idle" {
		return errors.Join(errors.New("state "+strings.TrimSpace(state)), err)
	}
	return nil
}
