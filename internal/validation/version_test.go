package validation

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
	// An object stored without the field means 24.11.
	if v := (&sunkv1.SlurmClusterSpec{}).Version(); v != "24.11" {
		t.Errorf("Version() of a spec without slurmVersion = %q, want 24.11", v)
	}
}
