// A NodeSet's containers for jobs: the image cache, registries and pull credentials of Pyxis's
// flags on its nodes (docs/containers.md).

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// NodeSetContainers are the settings of containers for jobs on a NodeSet's nodes. The images
// are pulled into a volume of each pod at /var/lib/sunk (the image cache and the containers'
// writable layers): an emptyDir by default, or cacheVolume.
// +kubebuilder:validation:XValidation:rule="!has(self.cacheSize) || !has(self.cacheVolume)",message="spec.containers.cacheSize and spec.containers.cacheVolume are exclusive: size the volume itself"
type NodeSetContainers struct {
	// Enabled: jobs may ask for a container (--container-image, --container-name). When any
	// NodeSet of a cluster enables containers, every node of the cluster loads sunk's SPANK
	// plugin; on nodes of NodeSets without them a step that asks for a container fails with
	// "containers are not enabled on this node".
	Enabled bool `json:"enabled"`

	// CacheSize is the size limit of the emptyDir that holds the image cache and the
	// containers' writable layers. Default: no limit but the node's ephemeral storage.
	// +optional
	CacheSize *resource.Quantity `json:"cacheSize,omitempty"`

	// CacheVolume replaces the emptyDir (for example a hostPath, so that the cache outlives
	// the pod, or an ephemeral volume). It must not be on overlayfs: the writable layers are
	// overlayfs upper directories.
	// +optional
	CacheVolume *corev1.VolumeSource `json:"cacheVolume,omitempty"`

	// InsecureRegistries are registries (HOST or HOST:PORT) reached over plain HTTP without
	// TLS, such as a registry inside the cluster.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:[0-9]{1,5})?$`
	// +optional
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`

	// ImagePullSecrets are Secrets of type kubernetes.io/dockerconfigjson, in the NodeSet's
	// namespace, whose credentials pull the images jobs ask for. They are not the pod's
	// imagePullSecrets (kubelet's, for sunk's own images): every user of these nodes may pull
	// whatever the credentials here can read, from the registries they name, so they are
	// chosen for jobs. Mounted read-only into slurmd's container, readable by root alone (the
	// helper), never into a job's container. A user's own credentials (enroot's
	// ~/.config/enroot/.credentials) take precedence for their registry. The pods start once
	// every Secret exists.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []SecretName `json:"imagePullSecrets,omitempty"`
}

// SecretName names a Secret in the object's namespace. (corev1.LocalObjectReference's name may
// be empty and is unbounded, which neither a list keyed by name nor a CEL budget accepts.)
type SecretName struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// ContainersEnabled says whether the NodeSet's jobs may run in containers.
func (ns *NodeSet) ContainersEnabled() bool {
	return ns.Spec.Containers != nil && ns.Spec.Containers.Enabled
}
