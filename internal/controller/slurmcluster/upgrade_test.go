package slurmcluster

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/wellknown"
)

func TestPlanUpgrade(t *testing.T) {
	all := map[string]bool{TierAccounting: true, TierController: true, TierClients: true, TierCompute: true}
	for _, tc := range []struct {
		name      string
		tiers     []tierState
		move      map[string]bool
		conf      string
		upgrading bool
		waiting   string
	}{
		{name: "new cluster: nothing runs yet, everything starts on the spec's release",
			tiers: []tierState{{Name: TierAccounting}, {Name: TierController}, {Name: TierClients}, {Name: TierCompute}},
			move:  all, conf: "26.05"},
		{name: "settled on 26.05, some not ready: not an upgrade, nothing waits",
			tiers: []tierState{{TierAccounting, "26.05", true}, {TierController, "26.05", false}, {TierClients, "26.05", true}, {TierCompute, "26.05", true}},
			move:  all, conf: "26.05"},
		{name: "spec raised: slurmdbd first",
			tiers: []tierState{{TierAccounting, "24.11", true}, {TierController, "24.11", true}, {TierClients, "24.11", true}, {TierCompute, "24.11", true}},
			move:  map[string]bool{TierAccounting: true}, conf: "24.11", upgrading: true, waiting: TierAccounting},
		{name: "slurmdbd on 26.05 but not serving yet: slurmctld waits",
			tiers: []tierState{{TierAccounting, "26.05", false}, {TierController, "24.11", true}, {TierClients, "24.11", true}, {TierCompute, "24.11", true}},
			move:  map[string]bool{TierAccounting: true}, conf: "24.11", upgrading: true, waiting: TierAccounting},
		{name: "slurmdbd serves: slurmctld next",
			tiers: []tierState{{TierAccounting, "26.05", true}, {TierController, "24.11", true}, {TierClients, "24.11", true}, {TierCompute, "24.11", true}},
			move:  map[string]bool{TierAccounting: true, TierController: true}, conf: "24.11", upgrading: true, waiting: TierController},
		{name: "no accounting: slurmctld first",
			tiers: []tierState{{Name: TierAccounting, Ready: true}, {TierController, "24.11", true}, {TierClients, "24.11", true}, {TierCompute, "24.11", true}},
			move:  map[string]bool{TierAccounting: true, TierController: true}, conf: "24.11", upgrading: true, waiting: TierController},
		{name: "slurmctld serves 26.05: clients next, compute still waits",
			tiers: []tierState{{TierAccounting, "26.05", true}, {TierController, "26.05", true}, {TierClients, "24.11", true}, {TierCompute, "24.11", true}},
			move:  map[string]bool{TierAccounting: true, TierController: true, TierClients: true}, conf: "24.11", upgrading: true, waiting: TierClients},
		{name: "clients done: compute nodes (the NodeSets' protected update)",
			tiers: []tierState{{TierAccounting, "26.05", true}, {TierController, "26.05", true}, {TierClients, "26.05", true}, {TierCompute, "24.11", true}},
			move:  all, conf: "24.11", upgrading: true, waiting: TierCompute},
		{name: "last compute node replaced: done, slurm.conf for 26.05",
			tiers: []tierState{{TierAccounting, "26.05", true}, {TierController, "26.05", true}, {TierClients, "26.05", true}, {TierCompute, "26.05", true}},
			move:  all, conf: "26.05"},
	} {
		p := planUpgrade("26.05", tc.tiers)
		if !reflect.DeepEqual(p.Move, tc.move) || p.ConfVersion != tc.conf || p.Upgrading != tc.upgrading || p.Waiting != tc.waiting {
			t.Errorf("%s:\n got move %v conf %s upgrading %v waiting %q\nwant move %v conf %s upgrading %v waiting %q", tc.name,
				p.Move, p.ConfVersion, p.Upgrading, p.Waiting, tc.move, tc.conf, tc.upgrading, tc.waiting)
		}
	}
}

func TestHoldTemplate(t *testing.T) {
	existing := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmctld", Image: "old:24.11"}, {Name: "sssd", Image: "old:24.11"}}},
	}
	rendered := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b", wellknown.LabelSlurmVersion: "26.05"}, Annotations: map[string]string{"h": "new"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmctld", Image: "new:26.05", Args: []string{"-x"}}, {Name: "added", Image: "new:26.05"}}},
	}
	holdTemplate(rendered, existing)
	if rendered.Spec.Containers[0].Image != "old:24.11" || rendered.Spec.Containers[0].Args[0] != "-x" {
		t.Errorf("slurmctld: %+v, want the old image and the new rendering otherwise", rendered.Spec.Containers[0])
	}
	if rendered.Spec.Containers[1].Image != "new:26.05" {
		t.Errorf("a container the old template lacks keeps the rendered image: %q", rendered.Spec.Containers[1].Image)
	}
	if _, ok := rendered.Labels[wellknown.LabelSlurmVersion]; ok || rendered.Annotations["h"] != "new" {
		t.Errorf("labels %v annotations %v: want no release label (the old template had none) and the new annotations", rendered.Labels, rendered.Annotations)
	}
	existing.Labels[wellknown.LabelSlurmVersion] = "24.11"
	holdTemplate(rendered, existing)
	if rendered.Labels[wellknown.LabelSlurmVersion] != "24.11" {
		t.Errorf("release label %q, want the old template's 24.11", rendered.Labels[wellknown.LabelSlurmVersion])
	}
}
