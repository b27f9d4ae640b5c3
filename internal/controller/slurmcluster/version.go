package slurmcluster

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/wellknown"
)

// runningVersion is the release the cluster runs, as its pods' LabelSlurmVersion say (a pod
// without the label runs 24.11): the oldest one among them, since that is the release every
// daemon must still understand. Without pods it is the spec's. current says whether every pod
// runs the spec's release.
func runningVersion(spec string, pods []string) (oldest string, current bool) {
	oldest, current = spec, true
	for _, v := range pods {
		if v == "" {
			v = sunkv1.SlurmVersionUnset
		}
		if v != spec {
			current = false
		}
		if v < oldest {
			oldest = v
		}
	}
	return oldest, current
}

// observeVersion reads what each upgrade tier runs, plans the next step (upgrade.go), and sets
// the SlurmVersion condition (message: the oldest release a daemon runs) and FeaturesAvailable
// (what the spec's release lacks).
func (r *Reconciler) observeVersion(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, st *status) (upgradePlan, error) {
	want := sc.Spec.Version()
	tiers, versions, err := r.tiers(ctx, sc, n)
	if err != nil {
		return upgradePlan{}, err
	}
	plan := planUpgrade(want, tiers)
	running, current := runningVersion(want, versions)
	if current && !plan.Upgrading {
		st.set(sunkv1.ConditionSlurmVersion, true, sunkv1.ReasonCurrent, running)
	} else {
		st.set(sunkv1.ConditionSlurmVersion, false, sunkv1.ReasonUpgrading, running)
	}
	// One event per step: when the tier the upgrade waits on changes.
	step := ""
	if plan.Upgrading {
		step = want + "/" + plan.Waiting
	}
	if last, _ := r.upgradeStep.Swap(sc.UID, step); last != nil && last.(string) != step || last == nil && step != "" {
		reason := sunkv1.ReasonUpgrading
		if step == "" {
			reason = sunkv1.ReasonUpgraded
		}
		r.event(sc, corev1.EventTypeNormal, reason, plan.message(want))
	}
	if missing := slurmversion.Missing(want); len(missing) > 0 {
		st.set(sunkv1.ConditionFeaturesAvailable, false, sunkv1.ReasonOlderSlurm,
			"Slurm "+want+" lacks: "+strings.Join(missing, "; ")+". Raise spec.slurmVersion to have them.")
	} else {
		st.set(sunkv1.ConditionFeaturesAvailable, true, sunkv1.ReasonNewestSlurm, "Slurm "+want+" has every feature sunk offers")
	}
	return plan, nil
}

// tiers reads the release and readiness of each upgrade tier from its workloads and live pods,
// and the release of every live Slurm pod.
func (r *Reconciler) tiers(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names) ([]tierState, []string, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(sc.Namespace), client.MatchingLabels{wellknown.LabelCluster: sc.Name}); err != nil {
		return nil, nil, err
	}
	tierOfComponent := map[string]string{
		wellknown.ComponentAccounting: TierAccounting, wellknown.ComponentDatabase: TierAccounting,
		wellknown.ComponentController: TierController,
		wellknown.ComponentRestAPI:    TierClients, wellknown.ComponentLogin: TierClients,
		wellknown.ComponentLoginUser: TierClients, wellknown.ComponentLoginGroup: TierClients,
		wellknown.ComponentCompute: TierCompute,
	}
	states := map[string]*tierState{}
	order := []string{TierAccounting, TierController, TierClients, TierCompute}
	for _, t := range order {
		states[t] = &tierState{Name: t, Ready: true}
	}
	older := func(t *tierState, v string) {
		if t.Version == "" || v < t.Version {
			t.Version = v
		}
	}
	var versions []string
	for _, p := range pods.Items {
		t, ok := tierOfComponent[p.Labels[wellknown.LabelComponent]]
		if !ok || !p.DeletionTimestamp.IsZero() {
			continue
		}
		v := podVersion(p.Labels)
		versions = append(versions, v)
		older(states[t], v)
	}
	for _, w := range []struct {
		tier, name string
		obj        client.Object
	}{
		{TierAccounting, n.Accounting, &appsv1.StatefulSet{}}, {TierAccounting, n.Database, &appsv1.StatefulSet{}},
		{TierController, n.Controller, &appsv1.StatefulSet{}},
		{TierClients, n.RestAPI, &appsv1.Deployment{}}, {TierClients, n.Login, &appsv1.StatefulSet{}},
	} {
		if err := r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: w.name}, w.obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, err
		}
		tmpl, ready := kube.RolledOut(w.obj)
		older(states[w.tier], podVersion(tmpl.Labels))
		states[w.tier].Ready = states[w.tier].Ready && ready
	}
	out := make([]tierState, 0, len(order))
	for _, t := range order {
		out = append(out, *states[t])
	}
	return out, versions, nil
}

// tierOfWorkload is the upgrade tier of a StatefulSet or Deployment the reconcile applies.
func tierOfWorkload(n clusternames.Names, name string) string {
	switch name {
	case n.Accounting, n.Database:
		return TierAccounting
	case n.Controller:
		return TierController
	case n.RestAPI, n.Login:
		return TierClients
	}
	return ""
}

// holdIfWaiting keeps a workload of a tier that must not move yet on what it runs.
func (r *Reconciler) holdIfWaiting(ctx context.Context, n clusternames.Names, o client.Object, plan upgradePlan) error {
	tier := tierOfWorkload(n, o.GetName())
	if tier == "" || plan.Move[tier] {
		return nil
	}
	var rendered *corev1.PodTemplateSpec
	existing := o.DeepCopyObject().(client.Object)
	switch w := o.(type) {
	case *appsv1.StatefulSet:
		rendered = &w.Spec.Template
	case *appsv1.Deployment:
		rendered = &w.Spec.Template
	default:
		return nil
	}
	if err := r.Get(ctx, client.ObjectKeyFromObject(o), existing); err != nil {
		return client.IgnoreNotFound(err)
	}
	tmpl, _ := kube.RolledOut(existing)
	holdTemplate(rendered, tmpl)
	return nil
}
