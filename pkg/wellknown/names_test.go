package wellknown

import (
	"testing"

	"sunk.dev/sunk/pkg/slurm"
)

// TestJWTSecretKeys: a component that mounts the JWT Secret finds the previous key where
// slurm.NewJWTSourceFromFile looks for its fallback.
func TestJWTSecretKeys(t *testing.T) {
	if SecretJWTPreviousKey != SecretJWTKey+slurm.FallbackKeySuffix {
		t.Errorf("the previous key %q is not the file beside %q that slurm reads (%q)", SecretJWTPreviousKey, SecretJWTKey, slurm.FallbackKeySuffix)
	}
}

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
