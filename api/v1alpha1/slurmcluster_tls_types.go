// TLS between sunk's components and the SlurmCluster's endpoints they speak to.

package v1alpha1

// TLSSpec configures TLS on the endpoints sunk's components (the operator, sunk-syncer,
// sunk-scheduler) speak to: slurmrestd and the node watchers, whose requests carry SlurmUser's
// JWTs (docs/security.md, "TLS").
type TLSSpec struct {
	// Enabled serves slurmrestd (behind a TLS terminator in its pod) and the node watchers over
	// TLS with a certificate of the cluster's own CA, which the operator makes and renews in the
	// Secret <cluster>-tls; sunk's components trust that CA alone and check the Service's name.
	// false serves both over plain HTTP again: anyone who sees the pod network's traffic reads
	// SlurmUser's tokens, and with them acts as SlurmUser until they expire.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// On says whether the cluster's endpoints speak TLS: unless turned off.
func (s TLSSpec) On() bool { return s.Enabled == nil || *s.Enabled }
