// The Slurm releases a SlurmCluster may run (spec.slurmVersion), and what an unset field means.

package v1alpha1

// Slurm releases a SlurmCluster may run (spec.slurmVersion).
const (
	SlurmVersion2411 = "24.11"
	SlurmVersion2605 = "26.05"
	// SlurmVersionUnset is what a SlurmCluster without spec.slurmVersion runs: it was made
	// before the field existed, when 24.11 was sunk's only release.
	SlurmVersionUnset = SlurmVersion2411
	// SlurmVersionDefault is what admission sets on a SlurmCluster created without the field.
	SlurmVersionDefault = SlurmVersion2605
)

// SlurmVersions are the supported releases, oldest first.
func SlurmVersions() []string { return []string{SlurmVersion2411, SlurmVersion2605} }

// Version is the Slurm release the spec asks for: spec.slurmVersion, or 24.11 when unset.
func (s *SlurmClusterSpec) Version() string {
	if s.SlurmVersion == "" {
		return SlurmVersionUnset
	}
	return s.SlurmVersion
}
