package tlsproxy

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
)

var names = []string{"c1-restapi", "c1-restapi.ns", "c1-restapi.ns.svc", "c1-restapi.ns.svc.cluster.local"}

// terminator starts the terminator with a fresh CA's certificate in front of backend; it
// returns its address and the CA.
func terminator(t *testing.T, backend string) (addr string, ca []byte) {
	t.Helper()
	data := clustertlstest.Issue(t, "c1", names)
	certs := clustertlstest.CertFiles(t, data)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Server(l.Addr().String(), certs, backend, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), data[clustertls.CACertKey]
}

func client(t *testing.T, ca []byte, serverName string) *http.Client {
	t.Helper()
	cfg, err := clustertls.ClientConfig("ns/c1", serverName, clustertls.StaticRoots(ca))
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func TestTerminatorPassesRequestsThrough(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-SLURM-USER-NAME")+" "+
			r.Header.Get("X-SLURM-USER-TOKEN")+" "+string(body))
	}))
	defer backend.Close()
	addr, ca := terminator(t, backend.URL)

	req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/slurm/v0.0.41/job/submit?x=1", strings.NewReader(`{"job":{}}`))
	req.Header.Set("X-SLURM-USER-NAME", "slurm")
	req.Header.Set("X-SLURM-USER-TOKEN", "tok")
	resp, err := client(t, ca, "c1-restapi.ns.svc").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `POST /slurm/v0.0.41/job/submit?x=1 slurm tok {"job":{}}`; resp.StatusCode != http.StatusCreated || string(body) != want ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("through the terminator: %s %q %q, want 201 %q", resp.Status, resp.Header.Get("Content-Type"), body, want)
	}

	// Plain HTTP to the TLS port gets no answer of slurmrestd's.
	if resp, err := http.Get("http://" + addr + "/slurm/v0.0.41/ping/"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "GET") {
			t.Fatalf("plain HTTP to the TLS port: %s %q", resp.Status, body)
		}
	}
	// A client that checks another name, or trusts another CA, refuses the terminator.
	if _, err := client(t, ca, "c2-restapi.ns.svc").Get("https://" + addr + "/"); err == nil || !strings.Contains(err.Error(), "cluster ns/c1") {
		t.Fatalf("another name: %v", err)
	}
	_, otherCA := terminator(t, backend.URL)
	if _, err := client(t, otherCA, "c1-restapi.ns.svc").Get("https://" + addr + "/"); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("another CA: %v", err)
	}
}

func TestTerminatorWithoutBackend(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	addr, ca := terminator(t, gone)
	resp, err := client(t, ca, "c1-restapi").Get("https://" + addr + "/slurm/v0.0.41/ping/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "slurmrestd does not answer") {
		t.Fatalf("without slurmrestd: %s %q, want 502", resp.Status, body)
	}
	if _, err := Server(":0", nil, "https://x", nil); err == nil {
		t.Fatal("a backend that is not http://")
	}
}
