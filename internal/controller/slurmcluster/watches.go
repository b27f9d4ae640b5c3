package slurmcluster

// What wakes the SlurmCluster controller: its own objects, what it owns, the pods of its
// clusters and the ConfigMaps their scripts come from.

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/wellknown"
)

// SetupWithManager watches SlurmClusters, what they own, and the ConfigMaps their scripts
// come from.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("sunk-operator")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Slurm == nil {
		r.Slurm = slurmconn.New(slurmconn.Options{Reader: r.notOnlyOwned()})
	}
	// The ConfigMaps scripts come from are the user's, outside the operator's label-selected
	// cache: a cache of their metadata alone (no data, no managed fields) tells when one
	// changes, and the reconcile reads the one it names from the API server.
	scriptSources, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		DefaultNamespaces: r.Namespaces,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(scriptSources); err != nil {
		return err
	}
	configMapMetadata := &metav1.PartialObjectMetadata{}
	configMapMetadata.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return ctrl.NewControllerManagedBy(mgr).
		For(&sunkv1.SlurmCluster{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// The key Secrets are retained, not owned: a rotation (jwtrotation.go) is seen by label.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(clusterOfSecret)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(clusterOfPod)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.clusterOfComputePod), builder.WithPredicates(computePodPlacementChanged)).
		Watches(nodeMetadata(), handler.EnqueueRequestsFromMapFunc(r.clustersOnNode), builder.WithPredicates(nodeTopologyChanged)).
		WatchesRawSource(source.Kind(scriptSources, configMapMetadata,
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []ctrl.Request {
				return r.clustersReferencing(ctx, o)
			}))).
		Watches(&sunkv1.NodeSet{}, handler.EnqueueRequestsFromMapFunc(clusterOfNodeSet), builder.WithPredicates(nodeSetGoneOrConfigChanged)).
		Complete(r)
}

// notOnlyOwned reads from the cache, and from the API server what the cache does not hold.
func (r *Reconciler) notOnlyOwned() client.Reader {
	if r.APIReader == nil {
		return r.Client
	}
	return kube.CacheThenAPIReader{Cache: r.Client, API: r.APIReader}
}

// clusterOfPod maps slurmctld pods to their cluster: a slurmctld turning Ready is when a
// pending reconfigure can go on; and config check pods: their end is Slurm's verdict.
// Compute pods carry the cluster label too and are ignored.
func clusterOfPod(_ context.Context, o client.Object) []ctrl.Request {
	name, ok := o.GetLabels()[wellknown.LabelCluster]
	if c := o.GetLabels()[wellknown.LabelComponent]; !ok || (c != wellknown.ComponentController && c != wellknown.ComponentConfigCheck) {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// clusterOfSecret maps a Secret the operator made (labelled with its cluster) to the cluster.
func clusterOfSecret(_ context.Context, o client.Object) []ctrl.Request {
	name, ok := o.GetLabels()[wellknown.LabelCluster]
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

func (r *Reconciler) clustersReferencing(ctx context.Context, o client.Object) []ctrl.Request {
	var list sunkv1.SlurmClusterList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing SlurmClusters for a ConfigMap change")
		return nil
	}
	var reqs []ctrl.Request
	for _, sc := range list.Items {
		for _, s := range append(append([]sunkv1.Script{}, sc.Spec.Prolog...), sc.Spec.Epilog...) {
			if s.ConfigMapKeyRef != nil && s.ConfigMapKeyRef.Name == o.GetName() {
				reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: sc.Namespace, Name: sc.Name}})
				break
			}
		}
	}
	return reqs
}
