package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// TestRootPowers: a creation counts every root power set; an update only those it changes;
// an image of an allowed pattern is none; a NodeSet's volumes count for their host paths only.
func TestRootPowers(t *testing.T) {
	a := Authors{Groups: []string{DefaultPrivilegedGroup}, Images: []string{"sunk.dev/slurm:*"}}
	paths := func(ps []rootPower) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.path.String())
		}
		return strings.Join(out, " ")
	}
	withLua := &sunkv1.SlurmClusterSpec{Image: "sunk.dev/slurm:24.11", JobSubmitLua: "x", Prolog: []sunkv1.Script{{Name: "p", Inline: ptr.To("#!/bin/sh")}}}
	if got := paths(clusterRootPowers(&sunkv1.SlurmClusterSpec{}, withLua, a)); got != "spec.prolog spec.jobSubmitLua" {
		t.Errorf("creation: %q", got)
	}
	more := withLua.DeepCopy()
	more.Partitions = []sunkv1.PartitionSpec{{Name: "p"}}
	more.Login.Image = "example.com/x"
	if got := paths(clusterRootPowers(withLua, more, a)); got != "spec.login.image" {
		t.Errorf("update: %q", got)
	}
	pools := more.DeepCopy()
	pools.Login.Pools = []sunkv1.LoginPool{{Name: "users", Image: "sunk.dev/slurm:26.05"}, {Name: "team", Image: "example.com/y"}}
	if got := paths(clusterRootPowers(more, pools, a)); got != "spec.login.pools[1].image" {
		t.Errorf("pools, one image of no allowed pattern: %q", got)
	}
	if got := paths(clusterRootPowers(pools, pools, a)); got != "" {
		t.Errorf("pools unchanged: %q", got)
	}
	pvc := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}}}}
	host := append(pvc, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var"}}})
	if got := paths(nodeSetRootPowers(&sunkv1.NodeSetSpec{}, &sunkv1.NodeSetSpec{Volumes: pvc}, a)); got != "" {
		t.Errorf("a claim: %q", got)
	}
	if got := paths(nodeSetRootPowers(&sunkv1.NodeSetSpec{Volumes: pvc}, &sunkv1.NodeSetSpec{Volumes: host}, a)); got != "spec.volumes" {
		t.Errorf("a host path added: %q", got)
	}
	cache := &sunkv1.NodeSetSpec{Containers: &sunkv1.NodeSetContainers{CacheVolume: &corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/cache"}}}}
	if got := paths(nodeSetRootPowers(&sunkv1.NodeSetSpec{}, cache, a)); got != "spec.containers.cacheVolume" {
		t.Errorf("a host path cache: %q", got)
	}
	if got := paths(nodeSetRootPowers(&sunkv1.NodeSetSpec{}, &sunkv1.NodeSetSpec{PriorityClassName: "slurm-batch"}, a)); got != "spec.priorityClassName" {
		t.Errorf("setting a PriorityClass: %q, want spec.priorityClassName", got)
	}
}

// TestCheckAuthor: refusals only in admission, only for users outside the authors.
func TestCheckAuthor(t *testing.T) {
	a := Authors{Users: []string{"root-admin"}, Groups: []string{DefaultPrivilegedGroup}}
	withLua := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{JobSubmitLua: "x"}}
	as := func(user string, groups ...string) context.Context {
		return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups}}})
	}
	if errs := a.checkCluster(context.Background(), nil, withLua); len(errs) != 0 {
		t.Errorf("outside admission: %v", errs)
	}
	for _, ctx := range []context.Context{as("root-admin"), as("bob", "x", DefaultPrivilegedGroup)} {
		if errs := a.checkCluster(ctx, nil, withLua); len(errs) != 0 {
			t.Errorf("a privileged author: %v", errs)
		}
	}
	errs := a.checkCluster(as("alice", "system:authenticated"), nil, withLua)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.jobSubmitLua: Forbidden") || !strings.Contains(errs[0].Error(), "alice is not one of") {
		t.Errorf("alice: %v", errs)
	}
}
