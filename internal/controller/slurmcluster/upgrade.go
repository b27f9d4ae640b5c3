package slurmcluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// Tiers of a Slurm upgrade, in the order Slurm's upgrade guide gives: slurmdbd (with its
// database) first, then slurmctld, then the clients (slurmrestd, sackd and the login pods),
// then the compute nodes. A newer slurmdbd serves older slurmctlds, and a newer slurmctld
// older slurmds and clients, never the other way round.
const (
	TierAccounting = "accounting"
	TierController = "controller"
	TierClients    = "clients"
	TierCompute    = "compute"
)

// tierState is what a tier runs now.
type tierState struct {
	Name string
	// Version is the oldest release among the tier's live pods and its workloads' templates;
	// empty when it runs nothing (no accounting, no NodeSets).
	Version string
	// Ready: every replica of the tier's workloads runs its template and is ready.
	Ready bool
}

// upgradePlan is what the reconcile does about the release.
type upgradePlan struct {
	// Move says which tiers' workloads take the spec's release now; the others keep what they
	// run (their pod templates' images and release).
	Move map[string]bool
	// ConfVersion is the release the configuration is rendered for: the oldest one still
	// running, which every daemon reading it understands.
	ConfVersion string
	// Upgrading is false once nothing runs an older release than the spec's.
	Upgrading bool
	// Waiting names the tier the upgrade waits on, for the condition's message and the event.
	Waiting string
}

// planUpgrade decides the upgrade's next step. Without an older release anywhere (a new
// cluster, a settled one) every tier takes the spec's release. Otherwise the tiers move one at
// a time in Slurm's order: each tier up to the first that still runs an older release, or that
// took the new one but is not ready yet, may move; the tiers after it wait.
func planUpgrade(target string, tiers []tierState) upgradePlan {
	p := upgradePlan{Move: map[string]bool{}, ConfVersion: target}
	for _, t := range tiers {
		if t.Version != "" && t.Version < target {
			p.Upgrading = true
			if t.Version < p.ConfVersion {
				p.ConfVersion = t.Version
			}
		}
	}
	blocked := false
	for _, t := range tiers {
		if blocked {
			continue
		}
		p.Move[t.Name] = true
		if !p.Upgrading {
			continue
		}
		if (t.Version != "" && t.Version < target) || !t.Ready {
			blocked, p.Waiting = true, t.Name
		}
	}
	return p
}

// message says where an upgrade stands, for the SlurmVersion condition and events.
func (p upgradePlan) message(target string) string {
	if !p.Upgrading {
		return "every daemon runs Slurm " + target
	}
	return fmt.Sprintf("upgrading to Slurm %s: waiting for the %s tier (order: %s); slurm.conf is rendered for %s", target, p.Waiting,
		strings.Join([]string{TierAccounting, TierController, TierClients, TierCompute}, ", "), p.ConfVersion)
}

// podVersion is the release a pod (or pod template) runs: its LabelSlurmVersion, 24.11 without.
func podVersion(labels map[string]string) string {
	if v := labels[wellknown.LabelSlurmVersion]; v != "" {
		return v
	}
	return sunkv1.SlurmVersionUnset
}

// holdTemplate keeps a rendered pod template on the release its workload runs now: the
// existing template's container images and release label. Everything else (configuration,
// hashes) is the new rendering's.
func holdTemplate(rendered, existing *corev1.PodTemplateSpec) {
	images := map[string]string{}
	for _, c := range append(append([]corev1.Container{}, existing.Spec.InitContainers...), existing.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	for _, cs := range [][]corev1.Container{rendered.Spec.InitContainers, rendered.Spec.Containers} {
		for i := range cs {
			if img, ok := images[cs[i].Name]; ok {
				cs[i].Image = img
			}
		}
	}
	if v, ok := existing.Labels[wellknown.LabelSlurmVersion]; ok {
		rendered.Labels[wellknown.LabelSlurmVersion] = v
	} else {
		delete(rendered.Labels, wellknown.LabelSlurmVersion)
	}
}
