package slurmcluster

import (
	"context"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
)

// The policies follow the spec: applied with the cluster as their controller, removed when
// turned off or no longer called for, and an admin's policy of the same name is left alone.
func TestApplyNetworkPoliciesFollowsTheSpec(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "slurm", UID: "uid-c1"},
		Spec:       sunkv1.SlurmClusterSpec{Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}},
	}
	n := clusternames.For(sc, "")
	// An admin's own policy under a name the operator would use for SSH.
	admins := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: n.IngressSSH, Namespace: "slurm"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc).Build()
	r := &Reconciler{Client: c, Scheme: scheme, SunkNamespace: "sunk-system"}
	ctx := context.Background()
	have := func() []string {
		t.Helper()
		var list networkingv1.NetworkPolicyList
		if err := c.List(ctx, &list, client.InNamespace("slurm")); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list.Items {
			if !metav1.IsControlledBy(&p, sc) {
				out = append(out, "admin:"+p.Name)
				continue
			}
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}

	if err := r.applyNetworkPolicies(ctx, sc, n); err != nil {
		t.Fatal(err)
	}
	if got, want := have(), []string{n.IngressDatabase, n.IngressPods, n.IngressSSH, n.IngressSunk}; !slices.Equal(got, want) {
		t.Fatalf("managed accounting, SSH: %v, want %v", got, want)
	}

	sc.Spec.Accounting.Mode = sunkv1.AccountingNone
	sc.Spec.Login.SSH.Enabled = ptr.To(false)
	if err := r.applyNetworkPolicies(ctx, sc, n); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, admins); err != nil {
		t.Fatal(err)
	}
	if got, want := have(), []string{"admin:" + n.IngressSSH, n.IngressPods, n.IngressSunk}; !slices.Equal(got, want) {
		t.Fatalf("no accounting, no SSH: %v, want %v", got, want)
	}

	sc.Spec.NetworkPolicy.Enabled = ptr.To(false)
	if err := r.applyNetworkPolicies(ctx, sc, n); err != nil {
		t.Fatal(err)
	}
	if got, want := have(), []string{"admin:" + n.IngressSSH}; !slices.Equal(got, want) {
		t.Fatalf("turned off: %v, want %v", got, want)
	}
}
