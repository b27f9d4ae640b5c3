package slurmcluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// apply creates desired or brings the existing object to it, owned by the cluster. Fields
// the API server owns (a Service's cluster IP, a StatefulSet's claim templates, which are
// immutable) are kept from the existing object.
func (r *Reconciler) apply(ctx context.Context, sc *sunkv1.SlurmCluster, desired client.Object) error {
	return r.applyOwned(ctx, sc, desired)
}

// applyOwned is apply with another owner than the cluster (a per-user login pod's StatefulSet
// owns its Secret and Service, so that deleting it takes them along).
func (r *Reconciler) applyOwned(ctx context.Context, owner, desired client.Object) error {
	existing := desired.DeepCopyObject().(client.Object)
	existing.SetResourceVersion("")
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, existing, func() error {
		if existing.GetUID() != "" && !metav1.IsControlledBy(existing, owner) {
			return fmt.Errorf("%T %s exists and is not owned by %T %s: refusing to take it over", existing, existing.GetName(), owner, owner.GetName())
		}
		existing.SetLabels(mergeMaps(existing.GetLabels(), desired.GetLabels()))
		switch e := existing.(type) {
		case *corev1.ConfigMap:
			e.Data = desired.(*corev1.ConfigMap).Data
		case *corev1.Secret:
			e.Data = desired.(*corev1.Secret).Data
		case *corev1.Service:
			d := desired.(*corev1.Service)
			ip, ips, fam, pol := e.Spec.ClusterIP, e.Spec.ClusterIPs, e.Spec.IPFamilies, e.Spec.IPFamilyPolicy
			e.Spec = d.Spec
			if ip != "" {
				e.Spec.ClusterIP, e.Spec.ClusterIPs, e.Spec.IPFamilies, e.Spec.IPFamilyPolicy = ip, ips, fam, pol
			}
		case *appsv1.StatefulSet:
			d := desired.(*appsv1.StatefulSet)
			vct := e.Spec.VolumeClaimTemplates
			e.Spec = d.Spec
			if !e.CreationTimestamp.IsZero() {
				e.Spec.VolumeClaimTemplates = vct
			}
		case *appsv1.Deployment:
			e.Spec = desired.(*appsv1.Deployment).Spec
		case *policyv1.PodDisruptionBudget:
			e.Spec = desired.(*policyv1.PodDisruptionBudget).Spec
		case *networkingv1.NetworkPolicy:
			e.Spec = desired.(*networkingv1.NetworkPolicy).Spec
		case *corev1.PersistentVolumeClaim:
			if e.CreationTimestamp.IsZero() {
				e.Spec = desired.(*corev1.PersistentVolumeClaim).Spec
			}
		default:
			return fmt.Errorf("apply: unsupported %T", desired)
		}
		return controllerutil.SetControllerReference(owner, existing, r.Scheme)
	})
	if err != nil {
		return fmt.Errorf("applying %T %s: %w", desired, desired.GetName(), err)
	}
	return nil
}

// deleteIfOwned removes an object that the spec no longer asks for.
func (r *Reconciler) deleteIfOwned(ctx context.Context, sc *sunkv1.SlurmCluster, o client.Object, name string) error {
	if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(o, sc) {
		return nil
	}
	if err := r.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// ensureRetained creates an object that outlives the cluster (state and keys) when it is
// absent, without an owner reference, and never changes an existing one but to release it.
func (r *Reconciler) ensureRetained(ctx context.Context, sc *sunkv1.SlurmCluster, desired client.Object) error {
	existing := desired.DeepCopyObject().(client.Object)
	err := r.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		if err := r.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", desired, desired.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return r.release(ctx, sc, existing)
}

// release drops the cluster's owner reference from an object that must outlive it; clusters
// made before sunk retained their keys and state claim own them.
func (r *Reconciler) release(ctx context.Context, sc *sunkv1.SlurmCluster, o client.Object) error {
	if !metav1.IsControlledBy(o, sc) {
		return nil
	}
	patch := client.MergeFromWithOptions(o.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	if err := controllerutil.RemoveControllerReference(sc, o, r.Scheme); err != nil {
		return err
	}
	if err := r.Patch(ctx, o, patch); err != nil {
		return fmt.Errorf("releasing %T %s from SlurmCluster %s: %w", o, o.GetName(), sc.Name, err)
	}
	return nil
}
