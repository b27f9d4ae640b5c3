package wellknown

import "testing"

func TestDrainOwner(t *testing.T) {
	for _, c := range []struct {
		reason                string
		sunk, nodeSet, syncer bool
	}{
		{"k8s: node cordoned", true, false, true},
		{"k8s: nodeset scale-in", true, true, false},
		{"k8s: nodeset", true, true, false},
		{"maintenance by alice", false, false, false},
		{"K8S: shouted", false, false, false},
		{"", false, false, false},
		{"not k8s: inside", false, false, false},
	} {
		if got := DrainBySunk(c.reason); got != c.sunk {
			t.Errorf("DrainBySunk(%q) = %v", c.reason, got)
		}
		if got := DrainByNodeSet(c.reason); got != c.nodeSet {
			t.Errorf("DrainByNodeSet(%q) = %v", c.reason, got)
		}
		if got := DrainBySyncer(c.reason); got != c.syncer {
			t.Errorf("DrainBySyncer(%q) = %v", c.reason, got)
		}
	}
}
