package slurmcluster

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
)

// The cluster's NetworkPolicies (render.NetworkPolicies); deleted as the spec stops asking for them.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// applyNetworkPolicies applies the policies the spec calls for and removes the others. It
// runs before the workloads, so that a new cluster's daemons are never reachable from
// everywhere, not even while their first pods start.
func (r *Reconciler) applyNetworkPolicies(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names) error {
	want := map[string]bool{}
	if render.NetworkPoliciesEnabled(sc) {
		for _, p := range render.NetworkPolicies(sc, n, r.SunkNamespace) {
			if err := r.apply(ctx, sc, p); err != nil {
				return err
			}
			want[p.Name] = true
		}
	}
	for _, name := range []string{n.IngressPods, n.IngressDatabase, n.IngressSunk, n.IngressSSH, n.IngressLoginPools} {
		if want[name] {
			continue
		}
		if err := r.deleteIfOwned(ctx, sc, &networkingv1.NetworkPolicy{}, name); err != nil {
			return err
		}
	}
	return nil
}
