package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// AddFinalizer puts finalizer on a live object with an optimistic-lock patch; it reports
// whether it wrote (the patch's watch event then brings the next reconcile).
func AddFinalizer(ctx context.Context, c client.Client, o client.Object, finalizer string) (bool, error) {
	if controllerutil.ContainsFinalizer(o, finalizer) {
		return false, nil
	}
	patch := client.MergeFromWithOptions(o.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(o, finalizer)
	if err := c.Patch(ctx, o, patch); err != nil {
		return false, fmt.Errorf("adding finalizer %s: %w", finalizer, err)
	}
	return true, nil
}

// RemoveFinalizer drops finalizer with an optimistic-lock patch; an object already gone is
// not an error.
func RemoveFinalizer(ctx context.Context, c client.Client, o client.Object, finalizer string) error {
	patch := client.MergeFromWithOptions(o.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(o, finalizer)
	if err := c.Patch(ctx, o, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s: %w", finalizer, err)
	}
	return nil
}

// NamespaceTerminating says whether a namespace is being deleted, everything in it with it;
// a namespace already gone reads as not terminating.
func NamespaceTerminating(ctx context.Context, c client.Reader, name string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !ns.DeletionTimestamp.IsZero(), nil
}
