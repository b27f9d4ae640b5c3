package cmdutil

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
// holds every Pod, Secret, ConfigMap, Service, Deployment, StatefulSet and NetworkPolicy of the
// Kubernetes cluster, and its heap grows with other tenants' objects (and their data) up to its
// memory limit. What the operator reads but did not create (a prolog's ConfigMap, a JWT key Secret an
// admin made, the external database's password Secret) it reads through
// kube.CacheThenAPIReader, which asks the API server when the cache does not have it.
// namespaces (nil: all) are the namespaces it manages (WatchNamespaces).
func OperatorCacheOptions(namespaces map[string]cache.Config) cache.Options {
	owned := cache.ByObject{Label: OwnedBySunk()}
	return cache.Options{
		DefaultNamespaces: namespaces,
		// Managed fields are most of a small object's metadata and nothing the operator reads.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                 owned,
			&corev1.Secret{}:              owned,
			&corev1.ConfigMap{}:           owned,
			&corev1.Service{}:             owned,
			&appsv1.Deployment{}:          owned,
			&appsv1.StatefulSet{}:         owned,
			&networkingv1.NetworkPolicy{}: owned,
		}}
}

// WatchNamespaces turns the --watch-namespaces flag (comma-separated; empty: all) into a
// cache's DefaultNamespaces. An operator limited to some namespaces leaves the SlurmClusters
// of others to another operator: two operators acting on one cluster fight over its objects.
func WatchNamespaces(flagValue string) map[string]cache.Config {
	var m map[string]cache.Config
	for _, ns := range CommaList(flagValue) {
		if m == nil {
			m = map[string]cache.Config{}
		}
		m[ns] = cache.Config{}
	}
	return m
}

// CommaList is a flag's comma-separated values, trimmed, without empty ones.
func CommaList(flagValue string) []string {
	var out []string
	for _, v := range strings.Split(flagValue, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
