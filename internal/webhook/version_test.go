package webhook

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestSlurmVersionAdmission(t *testing.T) {
	for v, want := range map[string]string{
		"": "", "24.11": "", "26.05": "",
		"25.11": `spec.slurmVersion: Unsupported value: "25.11": supported values: "24.11", "26.05"`,
		"26.5":  `spec.slurmVersion: Unsupported value: "26.5"`,
	} {
		errs, _ := ValidateSpec(&sunkv1.SlurmClusterSpec{SlurmVersion: v}, field.NewPath("spec"))
		got := errs.ToAggregate()
		if (want == "") != (got == nil) || got != nil && !strings.Contains(got.Error(), want) {
			t.Errorf("slurmVersion %q: %v, want %q", v, got, want)
		}
	}
	// Admission's default, on create only (the webhook's verbs): new clusters run 26.05, a
	// cluster naming its release keeps it.
	for in, want := range map[string]string{"": "26.05", "24.11": "24.11", "26.05": "26.05"} {
		sc := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{SlurmVersion: in}}
		DefaultSlurmVersion(sc)
		if sc.Spec.SlurmVersion != want {
			t.Errorf("default of %q: %q, want %q", in, sc.Spec.SlurmVersion, want)
		}
	}
	// An object stored without the field means 24.11.
	if v := (&sunkv1.SlurmClusterSpec{}).Version(); v != "24.11" {
		t.Errorf("Version() of a spec without slurmVersion = %q, want 24.11", v)
	}
}
