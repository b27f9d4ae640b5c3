//go:build integration

package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestSlurmVersionDefaultsImagesAndAdmission: a SlurmCluster created without spec.slurmVersion
// gets 26.05 from admission and, without spec.image, the operator's 26.05 image; its pods are
// labelled with the release, and its conditions say what runs and what the release lacks. An
// unknown release, a downgrade and removing the field are refused, naming the field.
func TestSlurmVersionDefaultsImagesAndAdmission(t *testing.T) {
	images := slurmversion.Images{"24.11": "registry.example/slurm:24.11", "26.05": "registry.example/slurm:26.05"}
	h := startOperator(t, startAPI(t), func(r *slurmcluster.Reconciler) { r.Images = images })
	ctx := context.Background()

	sc := newCluster(h.ns, "v1")
	sc.Spec.SlurmVersion, sc.Spec.Image, sc.Spec.Prolog = "", "", nil
	tree := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"example.com/spine", "example.com/leaf"}}}
	sc.Spec.Topology = tree
	if err := h.c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if got := h.cluster(t, "v1").Spec.SlurmVersion; got != "26.05" {
		t.Fatalf("spec.slurmVersion after create = %q, want admission's default 26.05", got)
	}
	var ctld appsv1.StatefulSet
	eventually(t, "controller StatefulSet on the 26.05 image", func() error {
		if err := h.get(t, "v1-controller", &ctld); err != nil {
			return err
		}
		if img := ctld.Spec.Template.Spec.Containers[0].Image; img != images["26.05"] {
			return fmt.Errorf("image %q", img)
		}
		return nil
	})
	if l := ctld.Spec.Template.Labels[wellknown.LabelSlurmVersion]; l != "26.05" {
		t.Errorf("pod template label %s = %q, want 26.05", wellknown.LabelSlurmVersion, l)
	}
	if h.cluster(t, "v1").Spec.Image != "" {
		t.Error("the operator wrote its default image into spec.image: raising slurmVersion would no longer change it")
	}
	eventually(t, "SlurmVersion and FeaturesAvailable conditions", func() error {
		c := h.cluster(t, "v1")
		v, f := condition(c, sunkv1.ConditionSlurmVersion), condition(c, sunkv1.ConditionFeaturesAvailable)
		if v.Status != metav1.ConditionTrue || v.Message != "26.05" || f.Status != metav1.ConditionTrue {
			return fmt.Errorf("SlurmVersion %+v, FeaturesAvailable %+v", v, f)
		}
		return nil
	})

	// The topology of a 26.05 cluster is topology.yaml; 24.11's is topology.conf (below).
	eventually(t, "topology.yaml in the 26.05 cluster's configuration", func() error {
		var cm corev1.ConfigMap
		if err := h.get(t, "v1-config", &cm); err != nil {
			return err
		}
		if _, ok := cm.Data["topology.yaml"]; !ok || cm.Data["topology.conf"] != "" || strings.Contains(cm.Data["slurm.conf"], "TopologyPlugin=") {
			return fmt.Errorf("files %v", slices.Sorted(maps.Keys(cm.Data)))
		}
		return nil
	})

	// 24.11: its image, and a condition naming what it lacks.
	old := newCluster(h.ns, "v0")
	old.Spec.Image, old.Spec.Prolog, old.Spec.Topology = "", nil, tree
	if err := h.c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	eventually(t, "24.11 cluster's conditions", func() error {
		c := h.cluster(t, "v0")
		f := condition(c, sunkv1.ConditionFeaturesAvailable)
		if f.Status != metav1.ConditionFalse || f.Reason != sunkv1.ReasonOlderSlurm || !strings.Contains(f.Message, "topology.yaml") {
			return fmt.Errorf("FeaturesAvailable %+v", f)
		}
		var cm corev1.ConfigMap
		if err := h.get(t, "v0-config", &cm); err != nil {
			return err
		}
		if _, ok := cm.Data["topology.yaml"]; ok || cm.Data["topology.conf"] == "" {
			return fmt.Errorf("24.11 files %v", slices.Sorted(maps.Keys(cm.Data)))
		}
		if err := h.get(t, "v0-controller", &ctld); err != nil {
			return err
		}
		if img := ctld.Spec.Template.Spec.Containers[0].Image; img != images["24.11"] {
			return fmt.Errorf("image %q", img)
		}
		return nil
	})

	// Refusals, each naming spec.slurmVersion.
	bad := newCluster(h.ns, "v2")
	bad.Spec.SlurmVersion = "25.11"
	if err := h.c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.slurmVersion") || !strings.Contains(err.Error(), "Unsupported value") {
		t.Errorf("creating a cluster of Slurm 25.11: %v", err)
	}
	for _, tc := range []struct {
		name string
		to   string
	}{{"downgrade", "24.11"}, {"removing the field", ""}} {
		c := h.cluster(t, "v1")
		c.Spec.SlurmVersion = tc.to
		err := h.c.Update(ctx, c)
		if err == nil || !strings.Contains(err.Error(), "spec.slurmVersion") || !strings.Contains(err.Error(), "cannot be downgraded") {
			t.Errorf("%s (26.05 → %q): %v", tc.name, tc.to, err)
		}
	}
	// An upgrade is let in.
	c := h.cluster(t, "v0")
	c.Spec.SlurmVersion = "26.05"
	if err := h.c.Update(ctx, c); err != nil {
		t.Errorf("upgrading 24.11 → 26.05: %v", err)
	}
}
