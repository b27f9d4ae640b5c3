package clusternames

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestTLSNames(t *testing.T) {
	n := For(&sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns"}}, "")
	want := []string{"c1-restapi", "c1-restapi.ns", "c1-restapi.ns.svc", "c1-restapi.ns.svc.cluster.local",
		"c1-nodewatch", "c1-nodewatch.ns", "c1-nodewatch.ns.svc", "c1-nodewatch.ns.svc.cluster.local"}
	if got := n.TLSNames(); !slices.Equal(got, want) {
		t.Errorf("TLSNames = %v, want %v", got, want)
	}
	if !n.TLS || n.Scheme() != "https" || n.TLSSecret != "c1-tls" || n.ServerName(n.RestAPI) != "c1-restapi.ns.svc" {
		t.Errorf("a new cluster: TLS %v, scheme %s, Secret %s, server name %s", n.TLS, n.Scheme(), n.TLSSecret, n.ServerName(n.RestAPI))
	}
	off := For(&sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{TLS: sunkv1.TLSSpec{Enabled: ptr.To(false)}}}, "")
	if off.TLS || off.Scheme() != "http" {
		t.Errorf("spec.tls.enabled false: TLS %v, scheme %s", off.TLS, off.Scheme())
	}
}
