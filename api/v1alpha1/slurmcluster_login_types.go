// The SlurmCluster's login pods: their SSH access and the s6 services they run.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LoginSpec configures the login pods.
// +kubebuilder:validation:XValidation:rule="!has(self.pools) || size(self.pools) == 0 || has(self.sssdConfigSecretRef)",message="pools need sssdConfigSecretRef: their members come from the directory it names"
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

	// Pools are login pods beside the shared ones above. A PerUser pool gives each member of a
	// directory group a login pod of their own, in which nothing runs as root; a Group pool
	// gives a group login pods that only its members may log in to (docs/login.md).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.all(b, a.name == b.name || !b.name.startsWith(a.name + '-')))",message="a pool's name may not begin with another pool's name and '-': their objects' names (<cluster>-login-<pool>[-<user>]) could meet"
	// +optional
	Pools []LoginPool `json:"pools,omitempty"`
}

// LoginPoolType says who a pool's pods are for.
// +kubebuilder:validation:Enum=PerUser;Group
type LoginPoolType string

const (
	// LoginPoolPerUser: one pod per member of the pool's group, running as that member.
	LoginPoolPerUser LoginPoolType = "PerUser"
	// LoginPoolGroup: login pods like the shared ones (spec.login), which only the members of
	// the pool's group may log in to (sshd's AllowGroups), with resources of their own.
	LoginPoolGroup LoginPoolType = "Group"
)

// LoginPool is a set of login pods for the members of a directory group.
// +kubebuilder:validation:XValidation:rule="!(self.name in ['hosts', 'user', 'group'])",message="hosts, user and group may not name a pool: <cluster>-login-hosts, -login-user-hosts and -login-group-hosts are the login pods' own Services"
// +kubebuilder:validation:XValidation:rule="!has(self.home) || self.type != 'Group'",message="home is per user: a Group pool's users keep their homes where spec.sharedVolumes put them"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.type == 'Group'",message="replicas is a Group pool's: a PerUser pool has one pod per member"
type LoginPool struct {
	// Name of the pool, part of its pods' names (<cluster>-login-<pool>-<user>; a Group
	// pool's <cluster>-login-<pool>-<index>).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=12
	Name string `json:"name"`

	// Type of the pool.
	// +kubebuilder:default=PerUser
	// +optional
	Type LoginPoolType `json:"type,omitempty"`

	// Group is the directory's POSIX group (its cn) whose members each get a pod (PerUser) or
	// may log in to the pool's pods (Group).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Group string `json:"group"`

	// Replicas of a Group pool's StatefulSet (default 1).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// GracePeriod (PerUser) is how long the pod of a user who left the group is kept before
	// it is deleted: a user removed by mistake and put back keeps their sessions.
	// +kubebuilder:default="10m"
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`

	// Image overrides spec.login.image for the pool's pods.
	// +optional
	Image Image `json:"image,omitempty"`

	// Resources of each login container (a user's, or each of a Group pool's pods').
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector of the pool's pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the pool's pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// ServiceType of each user's SSH Service (<cluster>-login-<pool>-<user>, port 22), or of a
	// Group pool's (<cluster>-login-<pool>).
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// Home (PerUser), when set, gives each user a PersistentVolumeClaim of this size and class mounted
	// at their directory home (homeDirectory), kept when their pod goes. Unset, homes are
	// wherever spec.sharedVolumes put them.
	// +optional
	Home *StorageSpec `json:"home,omitempty"`
}

// LoginPoolStatus is what the operator last read of a pool's group.
type LoginPoolStatus struct {
	// Name of the pool.
	Name string `json:"name"`
	// Type of the pool.
	// +optional
	Type LoginPoolType `json:"type,omitempty"`
	// Users are the members with a pod, sorted (PerUser).
	// +optional
	Users []string `json:"users,omitempty"`
	// Leaving are the users who left the group and whose pods wait out the grace period.
	// +optional
	Leaving []string `json:"leaving,omitempty"`
	// Ready is the number of the pool's pods that are Ready.
	Ready int32 `json:"ready"`
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
