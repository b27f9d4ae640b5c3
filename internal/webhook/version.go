package webhook

import (
	"context"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-sunk-dev-v1alpha1-slurmcluster,mutating=true,failurePolicy=fail,sideEffects=None,groups=sunk.dev,resources=slurmclusters,verbs=create,versions=v1alpha1,name=mslurmcluster.sunk.dev,admissionReviewVersions=v1

// versionDefaulter sets spec.slurmVersion on SlurmClusters created without it. Only on create:
// a cluster stored without the field was made when 24.11 was the only release and keeps
// meaning 24.11 (a CRD default would flip it to the newer release on its next read, an
// upgrade nobody asked for).
type versionDefaulter struct{}

func (versionDefaulter) Default(_ context.Context, sc *sunkv1.SlurmCluster) error {
	DefaultSlurmVersion(sc)
	return nil
}

// DefaultSlurmVersion is what admission does to a new SlurmCluster: without
// spec.slurmVersion it gets the default release.
func DefaultSlurmVersion(sc *sunkv1.SlurmCluster) {
	if sc.Spec.SlurmVersion == "" {
		sc.Spec.SlurmVersion = sunkv1.SlurmVersionDefault
	}
}
