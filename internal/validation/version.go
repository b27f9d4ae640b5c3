package validation

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// validateSlurmVersion repeats the CRD's enum for the controller's own check (a cluster
// whose CRD predates the field may store any value).
func validateSlurmVersion(spec *sunkv1.SlurmClusterSpec, path *field.Path) field.ErrorList {
	if v := spec.SlurmVersion; v != "" && !slices.Contains(sunkv1.SlurmVersions(), v) {
		return field.ErrorList{field.NotSupported(path.Child("slurmVersion"), v, sunkv1.SlurmVersions())}
	}
	return nil
}
