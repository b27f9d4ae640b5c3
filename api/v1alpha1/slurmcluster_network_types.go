// Who may reach the SlurmCluster's pods: the NetworkPolicies the operator renders.

package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// NetworkPolicySpec configures the NetworkPolicies the operator renders for the cluster's pods
// (docs/security.md, "Network"). With them, a pod of another namespace reaches none of the
// cluster's daemons: the cluster's own pods reach each other on any port, MariaDB takes
// slurmdbd alone, slurmrestd and the node watcher also take sunk's components (the operator's
// namespace), and the login pods' sshd takes anyone. They take effect only where the
// Kubernetes cluster's network plugin enforces NetworkPolicies.
type NetworkPolicySpec struct {
	// Enabled renders the NetworkPolicies; false removes them, and every pod that can route to
	// the cluster's pods reaches every daemon of it again (slurmctld, slurmd, slurmdbd,
	// slurmrestd, MariaDB, the node watcher).
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Ingress rules added for every pod of the cluster but the managed database's: who else may
	// reach them, on which ports. For example a Prometheus namespace scraping an exporter on the
	// compute pods, or users' notebooks reaching their jobs' ports. An empty rule (no from, no
	// ports) lets in everyone on every port.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
}
