package slurm_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
	"sunk.dev/sunk/pkg/slurm"
)

// An https slurmrestd is spoken to only with the cluster's CA: none is a configuration error,
// another CA's server gets no request (the error names the cluster), the cluster's own gets it.
func TestClientVerifiesSlurmrestd(t *testing.T) {
	names := []string{"c1-restapi.ns.svc"}
	data, other := clustertlstest.Issue(t, "c1", names), clustertlstest.Issue(t, "c1", names)
	var got atomic.Int32
	srv := clustertlstest.Server(t, data, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-SLURM-USER-TOKEN") != "" {
			got.Add(1)
		}
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	tokens, err := slurm.NewJWTSource("slurm", []byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slurm.New(slurm.Config{URL: srv.URL, Tokens: tokens}); err == nil || !strings.Contains(err.Error(), "Config.TLS") {
		t.Fatalf("https without TLS: %v", err)
	}
	for _, tc := range []struct {
		name string
		ca   []byte
		sent int32
	}{{"another CA", other[clustertls.CACertKey], 0}, {"the cluster's CA", data[clustertls.CACertKey], 1}} {
		cfg, err := clustertls.ClientConfig("ns/c1", names[0], clustertls.StaticRoots(tc.ca))
		if err != nil {
			t.Fatal(err)
		}
		c, err := slurm.New(slurm.Config{URL: srv.URL, Tokens: tokens, TLS: cfg, APIVersion: slurm.V0041})
		if err != nil {
			t.Fatal(err)
		}
		got.Store(0)
		_, err = c.Diag(context.Background())
		if got.Load() != tc.sent {
			t.Errorf("%s: slurmrestd got %d requests with a token, want %d (%v)", tc.name, got.Load(), tc.sent, err)
		}
		if tc.sent == 0 && (err == nil || !strings.Contains(err.Error(), "cluster ns/c1")) {
			t.Errorf("%s: %v, want an error naming the cluster", tc.name, err)
		}
	}
}
