package nodeset

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/pkg/wellknown"
)

// addFinalizer puts FinalizerNodeSetDrain on a live NodeSet; it reports whether it wrote.
func (r *Reconciler) addFinalizer(ctx context.Context, ns *sunkv1.NodeSet) (bool, error) {
	return kube.AddFinalizer(ctx, r.Client, ns, wellknown.FinalizerNodeSetDrain)
}

// finalize runs a deleted NodeSet's scale-in to zero: every pod is drained (`k8s: nodeset
// deleted`), waits for its jobs and goes; the finalizer goes with the last pod. It lets go at
// once when there is no Slurm to wait on (the namespace is being deleted, or the SlurmCluster
// without FinalizerClusterDrain holding slurmctld) or when a person asks (AnnotationForceDelete).
func (r *Reconciler) finalize(ctx context.Context, ns *sunkv1.NodeSet) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ns, wellknown.FinalizerNodeSetDrain) {
		return r.releaseOrphans(ctx, ns.Namespace, ns.Name)
	}
	if why, now, err := r.letGoAtOnce(ctx, ns); err != nil {
		return ctrl.Result{}, err
	} else if now {
		if ns.Annotations[wellknown.AnnotationForceDelete] == "true" {
			r.event(ns, corev1.EventTypeWarning, sunkv1.ReasonForceDeleted, "%s", why)
		} else {
			r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonReleased, "%s", why)
		}
		return ctrl.Result{}, r.dropFinalizer(ctx, ns)
	}
	result, err := r.reconcileAndReport(ctx, ns)
	if err != nil || result.Requeue {
		return result, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns.Namespace), client.MatchingLabels{wellknown.LabelNodeSet: ns.Name}); err != nil {
		return ctrl.Result{}, err
	}
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], ns) {
			return result, nil // the scale-in to zero is not done; it requeues itself
		}
	}
	r.event(ns, corev1.EventTypeNormal, sunkv1.ReasonDeleting, "every pod is gone after its jobs: releasing the NodeSet")
	return ctrl.Result{}, r.dropFinalizer(ctx, ns)
}

// letGoAtOnce says whether the finalizer goes without waiting, and why.
func (r *Reconciler) letGoAtOnce(ctx context.Context, ns *sunkv1.NodeSet) (string, bool, error) {
	if ns.Annotations[wellknown.AnnotationForceDelete] == "true" {
		return fmt.Sprintf("%s=true: the pods are deleted without waiting for their jobs", wellknown.AnnotationForceDelete), true, nil
	}
	if going, err := kube.NamespaceTerminating(ctx, r.Client, ns.Namespace); err != nil {
		return "", false, err
	} else if going {
		return "the namespace is being deleted, slurmctld with it: no Slurm to wait on", true, nil
	}
	sc := &sunkv1.SlurmCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ns.Namespace, Name: ns.Spec.ClusterRef}, sc)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("SlurmCluster %s does not exist: no Slurm to wait on", ns.Spec.ClusterRef), true, nil
	case err != nil:
		return "", false, err
	case clusterGoing(sc):
		return fmt.Sprintf("SlurmCluster %s is being deleted without waiting for its jobs: no Slurm to wait on", ns.Spec.ClusterRef), true, nil
	}
	return "", false, nil
}

func (r *Reconciler) dropFinalizer(ctx context.Context, ns *sunkv1.NodeSet) error {
	return kube.RemoveFinalizer(ctx, r.Client, ns, wellknown.FinalizerNodeSetDrain)
}

// clusterGoing says a SlurmCluster is being deleted without holding slurmctld for its
// NodeSets: a cluster being deleted keeps its daemons until its NodeSets are gone
// (FinalizerClusterDrain) unless a person forced it, or an operator older than that finalizer
// let it go. Then there is no Slurm to wait on or to remove records from.
func clusterGoing(sc *sunkv1.SlurmCluster) bool {
	return !sc.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(sc, wellknown.FinalizerClusterDrain)
}
