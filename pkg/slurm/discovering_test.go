package slurm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRestd serves the real OpenAPI document of a release and a ping under each version it
// serves; any other path gets the release's real plain-text 404.
// While down is set, a path starting with it gets 503 and is neither counted nor recorded.
type fakeRestd struct {
	mu        sync.Mutex
	release   string // "24.11" or "26.05"
	down      string // "/" for every path
	discovers int
	paths     []string
}

func (f *fakeRestd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != "" && strings.HasPrefix(r.URL.Path, f.down) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	f.paths = append(f.paths, r.URL.Path)
	doc, err := os.ReadFile("testdata/openapi-v3-" + f.release + ".json")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if r.URL.Path == "/openapi/v3" {
		f.discovers++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/ping/") && strings.Contains(string(doc), `"`+r.URL.Path+`"`) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"pings":[{"hostname":"ctld","pinged":"UP","responding":true,"latency":5,"mode":"primary","primary":true}],"errors":[],"warnings":[]}`)
		return
	}
	// The answers of slurmrestd 24.11.5 and 26.05.5, as they are.
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusNotFound)
	if f.release == "24.11" {
		fmt.Fprint(w, "Unable find requested URL. Please view /openapi/v3 for API reference.")
	} else {
		fmt.Fprint(w, "Unable to find requested URL endpoint. Please query the '/openapi/v3' endpoint or visit 'https://slurm.schedmd.com/rest_api.html' for the OpenAPI specification which includes a list of all possible slurmrestd endpoints.")
	}
}

func (f *fakeRestd) set(release string) { f.mu.Lock(); f.release = release; f.mu.Unlock() }

func (f *fakeRestd) setDown(prefix string) { f.mu.Lock(); f.down = prefix; f.mu.Unlock() }

// discovering is a Discovering of f, served until the test ends, in apiVersion ("": discovered).
func (f *fakeRestd) discovering(t *testing.T, apiVersion string) (*Discovering, string) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	d, err := NewDiscovering(Config{URL: srv.URL, APIVersion: apiVersion, Tokens: StaticToken{User: "u", Value: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	return d, srv.URL
}

func (f *fakeRestd) counts() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.paths
	f.paths = nil
	return f.discovers, p
}

func TestDiscoveringFollowsSlurmrestd(t *testing.T) {
	f := &fakeRestd{release: "26.05"}
	d, _ := f.discovering(t, "")
	if d.APIVersion() != "" {
		t.Fatalf("built, and already speaks %q", d.APIVersion())
	}
	ctx := context.Background()
	for range 3 {
		if _, err := d.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Asked once, speaks the newest.
	if n, paths := f.counts(); n != 1 || d.APIVersion() != V0045 || paths[len(paths)-1] != "/slurm/v0.0.45/ping/" {
		t.Fatalf("%d discoveries, version %q, requests %v", n, d.APIVersion(), paths)
	}

	// slurmrestd goes back to 24.11: the next request finds v0.0.45 gone, the client asks
	// again and repeats the request in v0.0.42.
	f.set("24.11")
	if _, err := d.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	n, paths := f.counts()
	want := []string{"/slurm/v0.0.45/ping/", "/openapi/v3", "/slurm/v0.0.42/ping/"}
	if n != 2 || d.APIVersion() != V0042 || strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("%d discoveries, version %q, requests %v, want %v", n, d.APIVersion(), paths, want)
	}
}

// A configured version is kept: its absence is an error, never another version, and never
// "not found".
func TestDiscoveringConfiguredVersion(t *testing.T) {
	f := &fakeRestd{release: "26.05"}
	d, url := f.discovering(t, V0041)
	_, err := d.GetNode(context.Background(), "n1")
	if !errors.Is(err, ErrVersionNotServed) || errors.Is(err, ErrNotFound) {
		t.Fatalf("GetNode in v0.0.41 from 26.05: %v", err)
	}
	if n, _ := f.counts(); n != 0 || d.APIVersion() != V0041 {
		t.Fatalf("%d discoveries, version %q", n, d.APIVersion())
	}
	if !strings.Contains(err.Error(), "/slurm/v0.0.41/node/n1") {
		t.Errorf("the error does not name the path: %v", err)
	}
	if _, err := NewDiscovering(Config{URL: url, APIVersion: "v0.0.39", Tokens: StaticToken{User: "u", Value: "t"}}); err == nil || !strings.Contains(err.Error(), "v0.0.39") {
		t.Errorf("an unknown configured version: %v", err)
	}
}

// A slurmrestd that cannot be asked fails the request, and the next request asks again.
func TestDiscoveringFailsClosed(t *testing.T) {
	f := &fakeRestd{release: "26.05", down: "/"}
	d, _ := f.discovering(t, "")
	if _, err := d.ListNodes(context.Background(), time.Time{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ListNodes before slurmrestd is up: %v", err)
	}
	f.setDown("")
	if _, err := d.Ping(context.Background()); err != nil || d.APIVersion() != V0045 {
		t.Fatalf("Ping once it is up: %v, version %q", err, d.APIVersion())
	}
}

// A plain-text 404 that is not slurmrestd's stays what it was.
func TestNotServedOnlySlurmrestds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound) // text/plain
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{URL: srv.URL, APIVersion: V0042, Tokens: StaticToken{User: "u", Value: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNode(context.Background(), "n1"); errors.Is(err, ErrVersionNotServed) {
		t.Fatalf("a gateway's 404: %v", err)
	}
}

// An upgrade leaves v0.0.42 served, so nothing fails: the client re-checks an older version
// after RecheckOlder and moves to the newest, and stops asking once it speaks the newest.
func TestDiscoveringMovesUpAfterAnUpgrade(t *testing.T) {
	f := &fakeRestd{release: "24.11"}
	d, _ := f.discovering(t, "")
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d.now = func() time.Time { return clock }
	ctx := context.Background()
	ping := func() {
		t.Helper()
		if _, err := d.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ping()
	if n, _ := f.counts(); n != 1 || d.APIVersion() != V0042 {
		t.Fatalf("24.11: %d discoveries, version %q", n, d.APIVersion())
	}

	f.set("26.05")
	clock = clock.Add(RecheckOlder - time.Second)
	ping()
	if n, paths := f.counts(); n != 1 || d.APIVersion() != V0042 || paths[0] != "/slurm/v0.0.42/ping/" {
		t.Fatalf("before RecheckOlder: %d discoveries, version %q, requests %v", n, d.APIVersion(), paths)
	}
	clock = clock.Add(time.Second)
	ping()
	if n, paths := f.counts(); n != 2 || d.APIVersion() != V0045 || strings.Join(paths, " ") != "/openapi/v3 /slurm/v0.0.45/ping/" {
		t.Fatalf("after RecheckOlder: %d discoveries, version %q, requests %v", n, d.APIVersion(), paths)
	}
	clock = clock.Add(10 * RecheckOlder)
	ping()
	if n, _ := f.counts(); n != 2 {
		t.Fatalf("the newest version is re-checked: %d discoveries", n)
	}
}

// A re-check that fails keeps the client that works.
func TestDiscoveringRecheckFailureKeepsTheClient(t *testing.T) {
	f := &fakeRestd{release: "24.11"}
	d, _ := f.discovering(t, "")
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d.now = func() time.Time { return clock }
	ctx := context.Background()
	if _, err := d.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	f.setDown("/openapi/v3")
	clock = clock.Add(RecheckOlder)
	if _, err := d.Ping(ctx); err != nil || d.APIVersion() != V0042 {
		t.Fatalf("a failed re-check: %v, version %q", err, d.APIVersion())
	}
}
