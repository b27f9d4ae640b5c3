package syncer

import (
	"testing"

	"sunk.dev/sunk/pkg/slurm"
)

// TestGresCause: Slurm's GRES for a node, as Slurm 24.11 writes them, against what the pod
// registered (clusternames.RegisteredGres), and what the syncer then does to the node.
func TestGresCause(t *testing.T) {
	reg := func(g string) Registered { return Registered{Gres: g, Known: true} }
	gres := func(g string, state ...string) *slurm.Node { n := snode("", state...); n.Gres = g; return n }
	mismatch := func(slurmHas, podHas string) string {
		return "k8s: GRES mismatch (Slurm has " + slurmHas + ", the pod registered " + podHas + ")"
	}
	cases := []struct {
		name string
		reg  Registered
		node *slurm.Node
		want Action
	}{
		{"the same", reg("gpu:h100:8"), gres("gpu:h100:8", "IDLE"), Action{}},
		{"socket detail does not count", reg("gpu:h100:8"), gres("gpu:h100:8(S:0-1)", "IDLE"), Action{}},
		{"no GPUs on either side", reg(""), gres("(null)", "IDLE"), Action{}},
		{"untyped", reg("gpu:8"), gres("gpu:8", "IDLE"), Action{}},
		{"several, in another order", reg("nic:1,gpu:a100:2"), gres("gpu:a100:2,nic:1", "IDLE"), Action{}},
		{"fewer GPUs than granted", reg("gpu:h100:8"), gres("gpu:h100:4", "IDLE"),
			Action{Drain, mismatch("gpu:h100:4", "gpu:h100:8")}},
		{"none in Slurm", reg("gpu:h100:2"), gres("", "IDLE"), Action{Drain, mismatch("none", "gpu:h100:2")}},
		{"another type", reg("gpu:h100:8"), gres("gpu:a100:8", "ALLOCATED"), Action{Drain, mismatch("gpu:a100:8", "gpu:h100:8")}},
		{"GPUs the pod was not granted", reg(""), gres("gpu:2", "IDLE"), Action{Drain, mismatch("gpu:2", "none")}},
		{"zero devices found", reg("gpu:h100:8"), gres("gpu:h100:0", "IDLE"), Action{Drain, mismatch("none", "gpu:h100:8")}},
		{"our GRES drain, matching again: resume", reg("gpu:h100:8"),
			func() *slurm.Node {
				n := gres("gpu:h100:8", "IDLE", "DRAIN")
				n.Reason = mismatch("gpu:h100:4", "gpu:h100:8")
				return n
			}(), Action{Kind: Resume}},
		{"Slurm's own drain for missing devices is Slurm's", reg("gpu:h100:8"),
			func() *slurm.Node {
				n := gres("gpu:h100:4", "IDLE", "DRAIN")
				n.Reason = "gres/gpu count reported lower than configured (4 < 8)"
				return n
			}(), Action{}},
		// Nothing is decided on what cannot be read.
		{"a pod without a node line", Registered{}, gres("gpu:h100:4", "IDLE"), Action{}},
		{"Slurm's GRES unreadable", reg("gpu:h100:8"), gres("gpu::8", "IDLE"), Action{}},
		{"the pod's GRES unreadable", reg("gpu:h100:x:8"), gres("", "IDLE"), Action{}},
	}
	for _, c := range cases {
		if got := Decide(WithGres(nil, c.reg, c.node), c.node); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	// With a Kubernetes cause, the GRES cause comes after it.
	n := gres("", "IDLE")
	if got, want := DrainReason(WithGres([]string{CauseCordoned}, reg("gpu:1"), n)), "k8s: node cordoned; "+mismatch("none", "gpu:1")[5:]; got != want {
		t.Errorf("cordon and GRES: %q, want %q", got, want)
	}
}
