//go:build integration

package operator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbac "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// TestPrivilegedAuthors: a user whom RBAC lets write SlurmClusters and NodeSets, but who is not
// among the operator's privileged authors, is refused every field that gives root on compute
// hosts (an image outside the allowed patterns, scripts, Lua, services, sidecars, hostPath),
// each naming the field, at creation and when an update changes it, and may still write the
// rest; an admin (system:masters) may set them, and alice may then change other fields.
func TestPrivilegedAuthors(t *testing.T) {
	env := startAPI(t)
	h := startOperator(t, env)
	ctx := context.Background()
	role := &rbac.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "sunk-author"},
		Rules: []rbac.PolicyRule{{APIGroups: []string{"sunk.dev"}, Resources: []string{"slurmclusters", "nodesets"}, Verbs: []string{"get", "create", "update", "patch"}}}}
	binding := &rbac.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "alice"},
		RoleRef:  rbac.RoleRef{APIGroup: rbac.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbac.Subject{{Kind: rbac.UserKind, APIGroup: rbac.GroupName, Name: "alice"}}}
	for _, o := range []client.Object{role, binding} {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	alice, err := client.New(cfg, client.Options{Scheme: h.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	plain := func(name string) *sunkv1.SlurmCluster {
		sc := newCluster(h.ns, name)
		sc.Spec.Prolog = nil
		return sc
	}
	for _, c := range []struct {
		name   string
		object client.Object
		want   string
	}{
		{"an image no pattern allows", func() client.Object { sc := plain("img"); sc.Spec.Image = "example.com/evil:1"; return sc }(), "spec.image: Forbidden"},
		{"a login image", func() client.Object { sc := plain("login-img"); sc.Spec.Login.Image = "example.com/evil:1"; return sc }(), "spec.login.image: Forbidden"},
		{"a prolog", func() client.Object {
			sc := plain("prolog")
			sc.Spec.Prolog = []sunkv1.Script{{Name: "p", Inline: ptr.To("#!/bin/sh\ntrue\n")}}
			return sc
		}(), "spec.prolog: Forbidden: the script runs as root on every compute host"},
		{"a job_submit.lua", func() client.Object {
			sc := plain("lua")
			sc.Spec.JobSubmitLua = "function slurm_job_submit() return 0 end\nfunction slurm_job_modify() return 0 end\n"
			return sc
		}(), "spec.jobSubmitLua: Forbidden"},
		{"a NodeSet hostPath", func() client.Object {
			ns := newNodeSet(h.ns, "hostpath", "c")
			ns.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			ns.Spec.VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
			return ns
		}(), "spec.volumes: Forbidden: a hostPath volume reaches the host's files"},
		{"a NodeSet sidecar", func() client.Object {
			ns := newNodeSet(h.ns, "sidecar", "c")
			ns.Spec.Sidecars = []corev1.Container{{Name: "x", Image: "busybox"}}
			return ns
		}(), "spec.sidecars: Forbidden"},
		{"a NodeSet PriorityClass", func() client.Object {
			ns := newNodeSet(h.ns, "priority", "c")
			ns.Spec.PriorityClassName = "system-node-critical"
			return ns
		}(), "spec.priorityClassName: Forbidden: a PriorityClass lets the compute pods preempt other namespaces' pods"},
	} {
		if err := alice.Create(ctx, c.object); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "alice is not one of") {
			t.Errorf("alice creates %s: %v, want an error containing %q", c.name, err, c.want)
		}
	}

	// What is not a root power, and an image of an allowed pattern, alice may write.
	if err := alice.Create(ctx, plain("alices")); err != nil {
		t.Fatalf("alice creates a SlurmCluster of the allowed image without scripts: %v", err)
	}
	if err := alice.Create(ctx, newNodeSet(h.ns, "alices", "alices")); err != nil {
		t.Fatalf("alice creates a plain NodeSet: %v", err)
	}
	// The operator writes the cluster too (its finalizer): an update that lost that race is
	// made again on the new version; a refusal is returned at once.
	update := func(c client.Client, name string, change func(*sunkv1.SlurmCluster)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sc := &sunkv1.SlurmCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, sc); err != nil {
				return err
			}
			change(sc)
			return c.Update(ctx, sc)
		})
	}
	lua := func(sc *sunkv1.SlurmCluster) {
		sc.Spec.JobSubmitLua = "function slurm_job_submit() return 0 end\nfunction slurm_job_modify() return 0 end\n"
	}
	if err := update(alice, "alices", lua); err == nil || !strings.Contains(err.Error(), "spec.jobSubmitLua: Forbidden") {
		t.Errorf("alice adds a job_submit.lua: %v, want it refused", err)
	}
	if err := update(h.c, "alices", lua); err != nil {
		t.Fatalf("an admin adds a job_submit.lua: %v", err)
	}
	if err := update(alice, "alices", func(sc *sunkv1.SlurmCluster) {
		sc.Spec.Partitions = append(sc.Spec.Partitions, sunkv1.PartitionSpec{Name: "more"})
	}); err != nil {
		t.Errorf("alice adds a partition to a cluster whose Lua an admin wrote: %v", err)
	}
}
