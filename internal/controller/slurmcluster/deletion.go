package slurmcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// +kubebuilder:rbac:groups=sunk.dev,resources=nodesets,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters,verbs=patch
// +kubebuilder:rbac:groups=sunk.dev,resources=slurmclusters/finalizers,verbs=update

// addFinalizer puts FinalizerClusterDrain on a live SlurmCluster; it reports whether it wrote.
func (r *Reconciler) addFinalizer(ctx context.Context, sc *sunkv1.SlurmCluster) (bool, error) {
	return kube.AddFinalizer(ctx, r.Client, sc, wellknown.FinalizerClusterDrain)
}

// finalize holds a deleted SlurmCluster, slurmctld and all, while its NodeSets go the way a
// deleted NodeSet goes (drain, wait for the jobs, then the pods): it deletes them and waits.
// The owner references take the daemons only once the finalizer is gone. It lets go at once
// when the namespace is being deleted (everything goes with it) or a person asks
// (AnnotationForceDelete, which the NodeSets then follow).
func (r *Reconciler) finalize(ctx context.Context, sc *sunkv1.SlurmCluster) (ctrl.Result, error) {
	key := types.NamespacedName{Namespace: sc.Namespace, Name: sc.Name}
	if !controllerutil.ContainsFinalizer(sc, wellknown.FinalizerClusterDrain) {
		r.Slurm.Forget(key)
		return ctrl.Result{}, nil
	}
	if why, now, err := r.letGoAtOnce(ctx, sc); err != nil {
		return ctrl.Result{}, err
	} else if now {
		typ, reason := corev1.EventTypeNormal, sunkv1.ReasonReleased
		if sc.Annotations[wellknown.AnnotationForceDelete] == "true" {
			typ, reason = corev1.EventTypeWarning, sunkv1.ReasonForceDeleted
		}
		r.event(sc, typ, reason, why)
		return ctrl.Result{}, r.dropFinalizer(ctx, sc)
	}
	left, deleted, err := r.deleteNodeSets(ctx, sc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(deleted) > 0 {
		r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonDeletingNodeSets, fmt.Sprintf(
			"deleting NodeSets %s: their nodes drain and their pods go once their jobs are done; slurmctld stays until then (annotate %s=true to stop waiting)",
			strings.Join(deleted, ", "), wellknown.AnnotationForceDelete))
	}
	if len(left) > 0 {
		// The NodeSet watch wakes the cluster when one goes; the requeue is a backstop.
		return ctrl.Result{RequeueAfter: pollWhileDraining}, nil
	}
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonReleased, "every NodeSet is gone after its jobs: releasing the SlurmCluster")
	if err := r.dropFinalizer(ctx, sc); err != nil {
		return ctrl.Result{}, err
	}
	r.Slurm.Forget(key)
	return ctrl.Result{}, nil
}

// pollWhileDraining backs up the NodeSet watch while a deleted cluster waits for its NodeSets.
const pollWhileDraining = 30 * time.Second

// deleteNodeSets deletes the cluster's NodeSets that are not being deleted yet; it returns
// every NodeSet still there and the names of those it deleted now.
func (r *Reconciler) deleteNodeSets(ctx context.Context, sc *sunkv1.SlurmCluster) (left, deleted []string, err error) {
	nodeSets, err := r.nodeSetsOf(ctx, sc)
	if err != nil {
		return nil, nil, err
	}
	for _, ns := range nodeSets {
		left = append(left, ns.Name)
		if !ns.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("deleting NodeSet %s: %w", ns.Name, err)
		}
		deleted = append(deleted, ns.Name)
	}
	slices.Sort(deleted)
	return left, deleted, nil
}

// letGoAtOnce says whether the finalizer goes without waiting, and why.
func (r *Reconciler) letGoAtOnce(ctx context.Context, sc *sunkv1.SlurmCluster) (string, bool, error) {
	if sc.Annotations[wellknown.AnnotationForceDelete] == "true" {
		return fmt.Sprintf("%s=true: the daemons go now; NodeSets being deleted stop waiting for their jobs", wellknown.AnnotationForceDelete), true, nil
	}
	if going, err := kube.NamespaceTerminating(ctx, r.Client, sc.Namespace); err != nil {
		return "", false, err
	} else if going {
		return "the namespace is being deleted, every pod with it: nothing to wait for", true, nil
	}
	return "", false, nil
}

func (r *Reconciler) dropFinalizer(ctx context.Context, sc *sunkv1.SlurmCluster) error {
	return kube.RemoveFinalizer(ctx, r.Client, sc, wellknown.FinalizerClusterDrain)
}

// clusterOfNodeSet wakes a cluster when one of its NodeSets goes, which is what a deleted
// cluster waits for, or comes or changes with GPUs or containers (nodeSetGoneOrConfigChanged),
// which change gres.conf and plugstack.conf.
func clusterOfNodeSet(_ context.Context, o client.Object) []ctrl.Request {
	ns, ok := o.(*sunkv1.NodeSet)
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: ns.Namespace, Name: ns.Spec.ClusterRef}}}
}

// nodeSetGoneOrConfigChanged: a NodeSet's other changes say nothing a cluster's reconcile needs.
var nodeSetGoneOrConfigChanged = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return configOf(e.Object) != "" },
	UpdateFunc:  func(e event.UpdateEvent) bool { return configOf(e.ObjectOld) != configOf(e.ObjectNew) },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// configOf is what of a NodeSet the cluster's configuration renders: its GPUs (gpusOf) and
// whether it enables containers; "" for neither.
func configOf(o client.Object) string {
	ns, ok := o.(*sunkv1.NodeSet)
	if !ok {
		return ""
	}
	c := gpusOf(o)
	if ns.ContainersEnabled() {
		c += " containers"
	}
	return c
}

func hasGPUs(o client.Object) bool {
	ns, ok := o.(*sunkv1.NodeSet)
	return ok && render.ComputeGPUs(ns) > 0
}

// gpusOf is what of a NodeSet's GPUs the cluster's configuration renders: whether it has
// any, and the type it names (accounting tracks each).
func gpusOf(o client.Object) string {
	if !hasGPUs(o) {
		return ""
	}
	return "gpu:" + o.(*sunkv1.NodeSet).Spec.GPUType
}

// clusterNodeSetConfig reads what the cluster's NodeSets (not being deleted) add to its
// configuration: whether one grants GPUs, the GPU types such NodeSets name in spec.gpuType,
// and whether one enables containers. Types read from node labels are not among them: they
// come and go with nodes, and each change would re-execute slurmctld.
func (r *Reconciler) clusterNodeSetConfig(ctx context.Context, sc *sunkv1.SlurmCluster, in *render.ConfigInputs) error {
	nodeSets, err := r.nodeSetsOf(ctx, sc)
	if err != nil {
		return err
	}
	for _, ns := range nodeSets {
		if !ns.DeletionTimestamp.IsZero() {
			continue
		}
		if render.ComputeGPUs(ns) > 0 {
			in.GPUs = true
			if ns.Spec.GPUType != "" {
				in.GPUTypes = append(in.GPUTypes, ns.Spec.GPUType)
			}
		}
		in.Containers = in.Containers || ns.ContainersEnabled()
	}
	return nil
}

// nodeSetsOf lists the NodeSets whose clusterRef names the cluster.
func (r *Reconciler) nodeSetsOf(ctx context.Context, sc *sunkv1.SlurmCluster) ([]*sunkv1.NodeSet, error) {
	var list sunkv1.NodeSetList
	if err := r.List(ctx, &list, client.InNamespace(sc.Namespace)); err != nil {
		return nil, err
	}
	var out []*sunkv1.NodeSet
	for i := range list.Items {
		if ns := &list.Items[i]; ns.Spec.ClusterRef == sc.Name {
			out = append(out, ns)
		}
	}
	return out, nil
}
