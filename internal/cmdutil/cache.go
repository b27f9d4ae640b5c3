package cmdutil

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/pkg/wellknown"
)

// OwnedBySunk selects the objects the operator renders: every one carries the
// sunk.dev/cluster label (internal/render's meta, the key Secrets, compute pods).
func OwnedBySunk() labels.Selector {
	req, err := labels.NewRequirement(wellknown.LabelCluster, selection.Exists, nil)
	Must(err)
	return labels.NewSelector().Add(*req)
}

// OperatorCacheOptions restrict the operator's cache to the objects it owns: without them it
// holds every Pod, Secret, ConfigMap, Service, Deployment and StatefulSet of the Kubernetes
// cluster, and its heap grows with other tenants' objects (and their data) up to its memory
// limit. What the operator reads but did not create (a prolog's ConfigMap, a JWT key Secret an
// admin made, the external database's password Secret) it reads through
// kube.CacheThenAPIReader, which asks the API server when the cache does not have it.
func OperatorCacheOptions() cache.Options {
	owned := cache.ByObject{Label: OwnedBySunk()}
	return cache.Options{
		// Managed fields are most of a small object's metadata and nothing the operator reads.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:         owned,
			&corev1.Secret{}:      owned,
			&corev1.ConfigMap{}:   owned,
			&corev1.Service{}:     owned,
			&appsv1.Deployment{}:  owned,
			&appsv1.StatefulSet{}: owned,
		}}
}
