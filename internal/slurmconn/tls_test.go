package slurmconn

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// With spec.tls the pool speaks https to the Service's cluster IP and verifies the Service's
// name against the cluster's CA: no TLS Secret is no client (never plain HTTP instead), a
// server of another CA is refused naming the cluster, and a new CA is a new client.
func TestPoolSpeaksTLS(t *testing.T) {
	ctx := context.Background()
	n := clusternames.Names{Cluster: "a", Namespace: "ns", RestAPI: "a-restapi", JWTSecret: "a-jwt-key", TLSSecret: "a-tls", TLS: true}
	svc, jwt := objects("10.0.0.1", "key-1")
	c := fake.NewClientBuilder().WithObjects(svc, jwt).Build()
	var urls []string
	var hcs []*http.Client
	p := New(Options{Reader: c, Factory: func(url string, _ Keys, hc *http.Client) (slurm.Client, error) {
		urls, hcs = append(urls, url), append(hcs, hc)
		return slurmfake.New(), nil
	}})
	if _, err := p.For(ctx, n, ""); err == nil || !strings.Contains(err.Error(), "cluster ns/a") {
		t.Fatalf("without the TLS Secret: %v, want an error naming the cluster", err)
	}
	data := clustertlstest.Issue(t, "a", n.ServiceNames(n.RestAPI))
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-tls"}, Data: data}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	first, err := p.For(ctx, n, "")
	if err != nil {
		t.Fatal(err)
	}
	if urls[0] != "https://10.0.0.1:6820" {
		t.Fatalf("URL %s", urls[0])
	}
	// The server the Service's name is for: accepted (the name is checked, not the address).
	resp, err := hcs[0].Get(clustertlstest.Server(t, data, nil).URL)
	if err != nil {
		t.Fatalf("the cluster's own server: %v", err)
	}
	resp.Body.Close()
	// A server of another CA, for the same names: refused.
	if _, err := hcs[0].Get(clustertlstest.Server(t, clustertlstest.Issue(t, "a", n.ServiceNames(n.RestAPI)), nil).URL); err == nil ||
		!strings.Contains(err.Error(), "cluster ns/a") || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("another CA's server: %v", err)
	}
	// A server of the cluster's CA for another Service's names: refused.
	renamed, err := clustertls.Renewed("a", data, clustertls.Decision{NewCert: true}, []string{"b-restapi.ns.svc"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hcs[0].Get(clustertlstest.Server(t, renamed, nil).URL); err == nil || !strings.Contains(err.Error(), "a-restapi.ns.svc") {
		t.Fatalf("a certificate for another name: %v", err)
	}
	// A new CA in the Secret: a new client that trusts it.
	sec.Data = clustertlstest.Issue(t, "a", n.ServiceNames(n.RestAPI))
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if second, err := p.For(ctx, n, ""); err != nil || second == first {
		t.Fatalf("a new CA kept the old client (%v)", err)
	}
}
