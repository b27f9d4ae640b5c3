package webhook

import (
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestSlurmVersionDefault(t *testing.T) {
	// Admission's default, on create only (the webhook's verbs): new clusters run 26.05, a
	// cluster naming its release keeps it.
	for in, want := range map[string]string{"": "26.05", "24.11": "24.11", "26.05": "26.05"} {
		sc := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{SlurmVersion: in}}
		DefaultSlurmVersion(sc)
		if sc.Spec.SlurmVersion != want {
			t.Errorf("default of %q: %q, want %q", in, sc.Spec.SlurmVersion, want)
		}
	}
}
