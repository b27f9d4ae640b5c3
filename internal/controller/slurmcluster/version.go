package slurmcluster

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/wellknown"
)

// Reasons of the SlurmVersion and FeaturesAvailable conditions.
const (
	// ReasonCurrent: every Slurm pod of the cluster runs spec.slurmVersion.
	ReasonCurrent = "Current"
	// ReasonUpgrading: some pods still run an older release than spec.slurmVersion.
	ReasonUpgrading = "Upgrading"
	// ReasonNewestSlurm: the cluster's release has every feature sunk renders.
	ReasonNewestSlurm = "NewestSlurm"
	// ReasonOlderSlurm: the cluster's release lacks features of newer ones (the message names them).
	ReasonOlderSlurm = "OlderSlurm"
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

// observeVersion sets the SlurmVersion condition (message: the release the daemons run) from
// the cluster's pods, and FeaturesAvailable from what the spec's release lacks.
func (r *Reconciler) observeVersion(ctx context.Context, sc *sunkv1.SlurmCluster, st *status) error {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(sc.Namespace), client.MatchingLabels{wellknown.LabelCluster: sc.Name}); err != nil {
		return err
	}
	var versions []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() && p.Labels[wellknown.LabelComponent] != wellknown.ComponentConfigCheck {
			versions = append(versions, p.Labels[wellknown.LabelSlurmVersion])
		}
	}
	want := sc.Spec.Version()
	running, current := runningVersion(want, versions)
	if current {
		st.set(sunkv1.ConditionSlurmVersion, true, ReasonCurrent, running)
	} else {
		st.set(sunkv1.ConditionSlurmVersion, false, ReasonUpgrading, running)
	}
	if missing := slurmversion.Missing(want); len(missing) > 0 {
		st.set(sunkv1.ConditionFeaturesAvailable, false, ReasonOlderSlurm,
			"Slurm "+want+" lacks: "+strings.Join(missing, "; ")+". Raise spec.slurmVersion to have them.")
	} else {
		st.set(sunkv1.ConditionFeaturesAvailable, true, ReasonNewestSlurm, "Slurm "+want+" has every feature sunk offers")
	}
	return nil
}
