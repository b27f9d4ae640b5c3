package slurmcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=create;delete

// slurmAccepts says whether Slurm's own parser accepts a configuration the operator is about
// to apply, when Reconciler.SlurmConfigCheck is on (else it always does). A configuration
// already applied passes. Otherwise a check pod of the cluster's image (render.ConfigCheckPod)
// runs scontrol on the candidate files; until it ends the caller waits (wait > 0), and when
// Slurm refuses them ConfigApplied=False quotes Slurm's message and the caller applies
// nothing: the running configuration stays until the spec changes.
func (r *Reconciler) slurmAccepts(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *render.Config, st *status) (ok bool, wait time.Duration, err error) {
	if !r.SlurmConfigCheck {
		return true, 0, nil
	}
	current := &corev1.ConfigMap{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: n.Config}, current); {
	case err == nil && render.HashInSlurmConf(current.Data["slurm.conf"]) == cfg.Hash:
		return true, 0, r.deleteChecks(ctx, sc, "")
	case err != nil && !apierrors.IsNotFound(err):
		return false, 0, err
	}
	name := n.ConfigCheckName(cfg.Hash)
	if err := r.deleteChecks(ctx, sc, name); err != nil {
		return false, 0, err
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, pod); apierrors.IsNotFound(err) {
		if err := r.apply(ctx, sc, render.ConfigCheckConfigMap(n, cfg)); err != nil {
			return false, 0, err
		}
		pod = render.ConfigCheckPod(sc, n, cfg)
		if err := controllerutil.SetControllerReference(sc, pod, r.Scheme); err != nil {
			return false, 0, err
		}
		if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, 0, err
		}
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonCheckingConfig, fmt.Sprintf("Slurm checks the new configuration %s (pod %s)", cfg.Hash, name))
		return false, pollWhileConverging, nil
	} else if err != nil {
		return false, 0, err
	}
	done, accepted, stale, msg := render.ConfigCheckVerdict(pod)
	switch {
	case !done:
		st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonCheckingConfig, fmt.Sprintf("Slurm checks the new configuration %s (pod %s)", cfg.Hash, name))
		return false, pollWhileConverging, nil
	case accepted || stale:
		// Accepted: applied next, so the pod has served. Stale: checked again from scratch.
		if err := r.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return false, 0, err
		}
		if stale {
			return false, pollWhileConverging, nil
		}
		return true, 0, nil
	}
	msg = fmt.Sprintf("Slurm refuses the rendered configuration %s, so the running one stays (pod %s): %s", cfg.Hash, name, msg)
	if c := meta.FindStatusCondition(sc.Status.Conditions, sunkv1.ConditionConfigApplied); c == nil || c.Message != msg {
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonSlurmRejectedConfig, msg)
	}
	st.set(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonSlurmRejectedConfig, msg)
	return false, 0, nil
}

// deleteChecks deletes the cluster's check pods, but the one named keep.
func (r *Reconciler) deleteChecks(ctx context.Context, sc *sunkv1.SlurmCluster, keep string) error {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(sc.Namespace),
		client.MatchingLabels{wellknown.LabelCluster: sc.Name, wellknown.LabelComponent: wellknown.ComponentConfigCheck}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Name == keep || !metav1.IsControlledBy(p, sc) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
