package slurmcluster

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/wellknown"
)

// applyWorkloads applies the cluster's NetworkPolicies, the control plane's workloads and
// Services, and removes the ones the
// spec no longer calls for (a backup's Services, the node watchers' Service, the login
// Service without SSH, the accounting tiers of a cluster without managed accounting).
func (r *Reconciler) applyWorkloads(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, cfg *render.Config, jwtKeys *slurmconn.Keys, plan upgradePlan) error {
	if err := r.applyNetworkPolicies(ctx, sc, n); err != nil {
		return err
	}
	objs := []client.Object{
		render.ControllerService(n), render.ControllerStatefulSet(sc, n, cfg),
		render.RestAPIService(n), render.RestAPIDeployment(sc, n, cfg),
		render.S6ServicesConfigMap(n, n.LoginServices, wellknown.ComponentLogin, sc.Spec.Login.Services),
		render.LoginHostsService(n), render.LoginStatefulSet(sc, n, cfg),
	}
	for _, b := range render.ControlPlaneDisruptionBudgets(n) {
		objs = append(objs, b)
	}
	// Login pods ran as a Deployment before they needed stable hostnames (render.LoginHostsService).
	if err := r.deleteIfOwned(ctx, sc, &appsv1.Deployment{}, n.Login); err != nil {
		return err
	}
	if sc.Spec.Controller.Backup {
		if err := r.ensureRetained(ctx, sc, render.SharedStateClaim(sc, n)); err != nil {
			return err
		}
		for _, s := range render.ControllerPodServices(sc, n) {
			objs = append(objs, s)
		}
	} else {
		// The per-controller Services of a cluster that had a backup.
		for i := range 2 {
			if err := r.deleteIfOwned(ctx, sc, &corev1.Service{}, n.ControllerPod(i)); err != nil {
				return err
			}
		}
	}
	if sc.Spec.Controller.NodeWatcher {
		objs = append(objs, render.NodeWatchService(n))
	} else if err := r.deleteIfOwned(ctx, sc, &corev1.Service{}, n.NodeWatch); err != nil {
		return err
	}
	if render.SSHEnabled(sc) {
		objs = append(objs, render.LoginService(sc, n))
	} else if err := r.deleteIfOwned(ctx, sc, &corev1.Service{}, n.Login); err != nil {
		return err
	}
	switch sc.Spec.Accounting.Mode {
	case sunkv1.AccountingManaged, sunkv1.AccountingExternal:
		dbdHash, err := r.ensureSlurmdbdConf(ctx, sc, n)
		if err != nil {
			return err
		}
		// slurmdbd reads its JWT key only at start (its reconfigure rereads slurmdbd.conf, not
		// the auth plugins: src/slurmdbd/slurmdbd.c, reconfig()): a new key restarts it.
		// slurmdbd reads its keys only at start: a new JWT key or auth key ring restarts it.
		ring, err := r.authRingID(ctx, n)
		if err != nil {
			return err
		}
		dbdHash = render.HashStrings(dbdHash, keyID(jwtKeys.Current))
		if ring != "" { // a cluster that never rotated keeps its hash
			dbdHash = render.HashStrings(dbdHash, ring)
		}
		objs = append(objs, render.AccountingService(n), render.AccountingStatefulSet(sc, n, cfg, dbdHash))
		if sc.Spec.Accounting.Mode == sunkv1.AccountingManaged {
			objs = append(objs, render.DatabaseService(n), render.DatabaseStatefulSet(sc, n))
		}
	}
	for _, o := range objs {
		// An upgrade moves the tiers one at a time (upgrade.go).
		if err := r.holdIfWaiting(ctx, n, o, plan); err != nil {
			return err
		}
		if err := r.apply(ctx, sc, o); err != nil {
			return err
		}
	}
	if sc.Spec.Accounting.Mode != sunkv1.AccountingManaged {
		for _, o := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}} {
			if err := r.deleteIfOwned(ctx, sc, o, n.Database); err != nil {
				return err
			}
		}
	}
	if sc.Spec.Accounting.Mode == sunkv1.AccountingNone || sc.Spec.Accounting.Mode == "" {
		for _, o := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}} {
			if err := r.deleteIfOwned(ctx, sc, o, n.Accounting); err != nil {
				return err
			}
		}
	}
	return nil
}
