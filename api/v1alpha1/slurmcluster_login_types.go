// The SlurmCluster's login pods: their SSH access and the s6 services they run.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// LoginSpec configures the login pods.
type LoginSpec struct {
	// Replicas of the login Deployment; 0 runs no login pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image overrides spec.image for login pods.
	// +optional
	Image Image `json:"image,omitempty"`

	// Resources of the login container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// SSH configures sshd in the login pods.
	// +optional
	SSH SSHSpec `json:"ssh,omitempty"`

	// SSSDConfigSecretRef names a Secret with the key sssd.conf: with it, login pods run
	// SSSD, and the controller and compute pods an sssd container (a compute pod whose
	// NodeSet has an s6 service named sssd keeps its own), so that users and groups come from
	// LDAP wherever Slurm looks them up.
	// +optional
	SSSDConfigSecretRef *corev1.LocalObjectReference `json:"sssdConfigSecretRef,omitempty"`

	// Services are s6 services run in every login pod.
	// +listType=map
	// +listMapKey=name
	// +optional
	Services []S6Service `json:"services,omitempty"`

	// Sidecars are extra containers of the login pods.
	// +optional
	Sidecars []corev1.Container `json:"sidecars,omitempty"`
}

// SSHSpec configures sshd.
// +kubebuilder:validation:XValidation:rule="!has(self.permitRootLogin) || !self.permitRootLogin || has(self.authorizedKeysSecretRef)",message="permitRootLogin needs authorizedKeysSecretRef: root logs in by key only"
type SSHSpec struct {
	// Enabled runs sshd and exposes it with a Service.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// AuthorizedKeysSecretRef names a Secret with the key authorized_keys, root's authorized
	// keys, installed only with permitRootLogin; the Secret may also hold sshd's host keys
	// (ssh_host_ed25519_key, ssh_host_ecdsa_key, ssh_host_rsa_key). Users log in with the keys
	// of their own ~/.ssh/authorized_keys.
	// +optional
	AuthorizedKeysSecretRef *corev1.LocalObjectReference `json:"authorizedKeysSecretRef,omitempty"`

	// PermitRootLogin lets root log in over SSH, by key only (authorizedKeysSecretRef). Off by
	// default: root in a login pod can have sackd sign Slurm requests as root, and a root job is
	// root on the host of a (privileged) compute pod, so whoever holds these keys is a cluster
	// admin (docs/security.md).
	// +optional
	PermitRootLogin bool `json:"permitRootLogin,omitempty"`

	// ServiceType of the SSH Service.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`
}

// S6ServiceType is oneshot (runs once before the others start) or longrun (supervised).
// +kubebuilder:validation:Enum=oneshot;longrun
type S6ServiceType string

const (
	S6Oneshot S6ServiceType = "oneshot"
	S6Longrun S6ServiceType = "longrun"
)

// S6Service is a service supervised by s6 inside a Slurm pod.
type S6Service struct {
	// Name of the service; oneshots run in name order.
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9_.-]{0,62}$`
	Name string `json:"name"`

	// Type of the service.
	// +kubebuilder:default=longrun
	// +optional
	Type S6ServiceType `json:"type,omitempty"`

	// Run is the service's run script (with its #! line).
	// +kubebuilder:validation:MinLength=1
	Run string `json:"run"`
}
