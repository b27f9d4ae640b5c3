//go:build integration

package slurm_test

import (
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/internal/tlsproxy"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
)

// TestSlurmrestdBehindTheTerminator: the test bed's real slurmrestd behind sunk-tlsproxy's
// terminator, as a SlurmCluster with spec.tls runs it. A SlurmUser JWT request through TLS,
// verified against the cluster's CA and the Service's name, works; plain HTTP to the TLS port
// and a client of another CA reach nothing.
func TestSlurmrestdBehindTheTerminator(t *testing.T) {
	env := testenv.Slurm(t)
	names := []string{"c1-restapi", "c1-restapi.ns", "c1-restapi.ns.svc", "c1-restapi.ns.svc.cluster.local"}
	data := clustertlstest.Issue(t, "c1", names)
	certs := clustertlstest.CertFiles(t, data)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tlsproxy.Server(l.Addr().String(), certs, env.RESTURL, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	defer srv.Close()
	url := "https://" + l.Addr().String()

	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(t), slurm.WithLifetime(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	client := func(ca []byte) slurm.Client {
		t.Helper()
		cfg, err := clustertls.ClientConfig("ns/c1", "c1-restapi.ns.svc", clustertls.StaticRoots(ca))
		if err != nil {
			t.Fatal(err)
		}
		c, err := slurm.NewDiscovering(slurm.Config{URL: url, Tokens: tokens, TLS: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := ctxT(t, time.Minute)
	// Through TLS: the version discovery (GET /openapi/v3, about 0.9 MB) and a JWT request.
	if _, err := client(data[clustertls.CACertKey]).Diag(ctx); err != nil {
		t.Fatalf("Diag through the terminator: %v", err)
	}
	nodes, err := client(data[clustertls.CACertKey]).ListNodes(ctx, time.Time{})
	if err != nil || len(nodes.Nodes) == 0 {
		t.Fatalf("ListNodes through the terminator: %d nodes, %v", len(nodes.Nodes), err)
	}

	// Plain HTTP to the TLS port: Go's TLS server's 400, never slurmrestd's answer.
	user, value, err := tokens.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.Addr().String()+"/slurm/v0.0.42/diag/", nil)
	req.Header.Set("X-SLURM-USER-NAME", user)
	req.Header.Set("X-SLURM-USER-TOKEN", value)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "statistics") {
			t.Fatalf("plain HTTP to the TLS port: %s %.200s", resp.Status, body)
		}
	}
	if _, err := slurm.NewDiscovering(slurm.Config{URL: url, Tokens: tokens}); err == nil {
		t.Fatal("an https client without the cluster's CA")
	}

	// A client of another CA sends nothing.
	other := clustertlstest.Issue(t, "c1", names)
	if _, err := client(other[clustertls.CACertKey]).Diag(ctx); err == nil || !strings.Contains(err.Error(), "cluster ns/c1") {
		t.Fatalf("another CA: %v, want a refusal naming the cluster", err)
	}
}
