package slurmcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
)

// The TLS step makes the Secret once, owned by the cluster, leaves a current one alone, renews
// one whose names changed, refuses a Secret that is not the cluster's, and does nothing with
// spec.tls turned off.
func TestEnsureTLS(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "slurm", UID: "uid-c1"}}
	n := clusternames.For(sc, "")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc).Build()
	r := &Reconciler{Client: c, Scheme: scheme}
	ctx := context.Background()
	get := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm", Name: n.TLSSecret}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	wait, ok, err := r.ensureTLS(ctx, sc, n, newStatus(sc))
	if err != nil || !ok || wait <= 0 {
		t.Fatalf("first: wait %s, ok %v, %v", wait, ok, err)
	}
	s := get()
	if !metav1.IsControlledBy(s, sc) || s.Type != corev1.SecretTypeTLS {
		t.Fatalf("the Secret: owners %v, type %s", s.OwnerReferences, s.Type)
	}
	if d := clustertls.Decide(s.Data, n.TLSNames(), time.Now()); d.NewCA || d.NewCert {
		t.Fatalf("the Secret made needs renewing at once: %+v", d)
	}
	if _, ok, err := r.ensureTLS(ctx, sc, n, newStatus(sc)); err != nil || !ok || get().ResourceVersion != s.ResourceVersion {
		t.Fatalf("second: ok %v, %v; the Secret was written again", ok, err)
	}

	// Another cluster domain: new names, a new certificate under the same CA.
	n2 := clusternames.For(sc, "example.org")
	if _, ok, err := r.ensureTLS(ctx, sc, n2, newStatus(sc)); err != nil || !ok {
		t.Fatalf("renaming: ok %v, %v", ok, err)
	}
	renewed := get()
	if string(renewed.Data[clustertls.CACertKey]) != string(s.Data[clustertls.CACertKey]) ||
		string(renewed.Data[clustertls.CertKey]) == string(s.Data[clustertls.CertKey]) {
		t.Fatal("a name change: want the same CA and a new certificate")
	}

	// A Secret of that name that is not the cluster's stops the reconcile, saying so.
	other := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "c2", Namespace: "slurm", UID: "uid-c2"}}
	n3 := clusternames.For(other, "")
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n3.TLSSecret, Namespace: "slurm"}}); err != nil {
		t.Fatal(err)
	}
	st := newStatus(other)
	if _, ok, err := r.ensureTLS(ctx, other, n3, st); err != nil || ok {
		t.Fatalf("someone else's Secret: ok %v, %v", ok, err)
	}
	if cond := meta.FindStatusCondition(st.conditions, sunkv1.ConditionConfigApplied); cond == nil || cond.Reason != sunkv1.ReasonTLSFailed {
		t.Fatalf("ConfigApplied = %+v, want %s", cond, sunkv1.ReasonTLSFailed)
	}

	// Turned off: nothing to do, and nothing in the way.
	off := other.DeepCopy()
	off.Spec.TLS.Enabled = ptr.To(false)
	if _, ok, err := r.ensureTLS(ctx, off, clusternames.For(off, ""), newStatus(off)); err != nil || !ok {
		t.Fatalf("TLS off: ok %v, %v", ok, err)
	}
}
