package slurmcluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// applyGroupPools applies each Group login pool's StatefulSet and Service (rendered from
// withImage, the cluster with its release's image), and deletes those of pools gone from the
// spec, or no longer Group pools, with their headless Service when none is left. While an
// upgrade holds the clients tier, an existing pool keeps its pod template.
func (r *LoginPools) applyGroupPools(ctx context.Context, sc, withImage *sunkv1.SlurmCluster, n clusternames.Names, hold bool) error {
	wanted := map[string]bool{}
	for _, p := range sc.Spec.Login.Pools {
		if render.PoolType(p) != sunkv1.LoginPoolGroup {
			continue
		}
		wanted[n.LoginGroup(p.Name)] = true
		desired := render.LoginGroupStatefulSet(withImage, n, p)
		if hold {
			existing := &appsv1.StatefulSet{}
			err := r.Get(ctx, client.ObjectKeyFromObject(desired), existing)
			if err == nil {
				desired.Spec.Template = existing.Spec.Template
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
		for _, o := range []client.Object{render.LoginGroupHostsService(n), desired, render.LoginGroupService(n, p)} {
			if err := r.apply(ctx, sc, o); err != nil {
				return err
			}
		}
	}
	var list appsv1.StatefulSetList
	if err := r.List(ctx, &list, client.InNamespace(sc.Namespace), client.MatchingLabels{
		wellknown.LabelCluster: sc.Name, wellknown.LabelComponent: wellknown.ComponentLoginGroup}); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if wanted[s.Name] || !metav1.IsControlledBy(s, sc) {
			continue
		}
		// The pool's pods go with it: users there lose their sessions, not their jobs.
		for _, o := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}} {
			if err := r.deleteIfOwned(ctx, sc, o, s.Name); err != nil {
				return err
			}
		}
		r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonLoginPoolRemoved, fmt.Sprintf(
			"login pool %s: its pods %s deleted: the pool is gone from spec.login.pools, or no longer a Group pool", s.Labels[wellknown.LabelLoginPool], s.Name))
	}
	if !render.HasLoginPools(sc, sunkv1.LoginPoolGroup) {
		return r.deleteIfOwned(ctx, sc, &corev1.Service{}, n.LoginGroupHosts)
	}
	return nil
}
