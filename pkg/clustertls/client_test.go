package clustertls_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
)

var names = []string{"c1-restapi", "c1-restapi.ns", "c1-restapi.ns.svc", "c1-restapi.ns.svc.cluster.local"}

// ok answers "ok": a refused client never reads it.
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

func get(t *testing.T, url string, cfg *tls.Config) error {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func TestClientVerifies(t *testing.T) {
	data, other := clustertlstest.Issue(t, "c1", names), clustertlstest.Issue(t, "c1", names)
	s := clustertlstest.Server(t, data, ok)
	for _, tc := range []struct {
		name, serverName string
		roots            []byte
		want             string // "" for success
	}{
		{name: "the cluster's CA and a name of the certificate", serverName: "c1-restapi.ns.svc", roots: data[clustertls.CACertKey]},
		{name: "another CA", serverName: "c1-restapi.ns.svc", roots: other[clustertls.CACertKey], want: "unknown authority"},
		{name: "a name the certificate lacks", serverName: "c2-restapi.ns.svc", roots: data[clustertls.CACertKey], want: "c2-restapi.ns.svc"},
		{name: "no CA at all", serverName: "c1-restapi.ns.svc", roots: []byte("nothing"), want: "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := clustertls.ClientConfig("ns/c1", tc.serverName, clustertls.StaticRoots(tc.roots))
			if err != nil {
				t.Fatal(err)
			}
			err = get(t, s.URL, cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("GET: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("GET succeeded, want a refusal")
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cluster ns/c1")):
				t.Fatalf("GET: %v, want an error naming the cluster and %q", err, tc.want)
			}
		})
	}
	// Plain HTTP to the TLS port is no answer either.
	resp, err := http.Get(strings.Replace(s.URL, "https://", "http://", 1))
	if err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP to the TLS port answered 200")
		}
		resp.Body.Close()
	}
	if _, err := clustertls.ClientConfig("ns/c1", "", clustertls.StaticRoots(data[clustertls.CACertKey])); err == nil {
		t.Fatal("a config without a server name")
	}
	if _, err := clustertls.ClientConfig("ns/c1", "x", nil); err == nil {
		t.Fatal("a config without roots")
	}
}

// A client reads its roots at each handshake: a new CA is trusted without a new client.
func TestClientFollowsNewRoots(t *testing.T) {
	oldCA, newCA := clustertlstest.Issue(t, "c1", names), clustertlstest.Issue(t, "c1", names)
	s := clustertlstest.Server(t, newCA, ok)
	var roots atomic.Value
	roots.Store(oldCA[clustertls.CACertKey])
	cfg, err := clustertls.ClientConfig("ns/c1", names[0], func() ([]byte, error) { return roots.Load().([]byte), nil })
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	if _, err := c.Get(s.URL); err == nil {
		t.Fatal("the old CA's client accepted the new CA's server")
	}
	roots.Store(newCA[clustertls.CACertKey])
	resp, err := c.Get(s.URL)
	if err != nil {
		t.Fatalf("after the new CA: %v", err)
	}
	resp.Body.Close()
}
