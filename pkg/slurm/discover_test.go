package slurm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// The OpenAPI documents are the real ones of slurmrestd 24.11.5 and 26.05.5 (GET /openapi/v3 of
// the test beds), cut to their info and the names of their paths.
func TestDiscover(t *testing.T) {
	for _, tc := range []struct {
		file, release, newest string
		served                []string
	}{
		{"testdata/openapi-v3-24.11.json", "", V0042, []string{"v0.0.40", V0041, V0042}},
		{"testdata/openapi-v3-26.05.json", "26.05.5", V0045, []string{V0042, V0043, V0044, V0045}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			doc, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			srv := serve(t, http.StatusOK, "application/json", string(doc))
			cfg := Config{URL: srv.URL, Tokens: StaticToken{User: "u", Value: "t"}}
			s, err := Discover(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Versions, tc.served) || s.Release != tc.release || s.Newest() != tc.newest {
				t.Fatalf("Discover = %+v newest %q, want versions %v release %q newest %q", s, s.Newest(), tc.served, tc.release, tc.newest)
			}
			if _, v, err := Connect(context.Background(), cfg); err != nil || v != tc.newest {
				t.Fatalf("Connect = %q, %v; want %q", v, err, tc.newest)
			}
			// A configured version is taken as it is, without asking.
			cfg.APIVersion = V0041
			if _, v, err := Connect(context.Background(), cfg); err != nil || v != V0041 {
				t.Fatalf("Connect(V0041) = %q, %v", v, err)
			}
		})
	}
}

// Discover fails closed: no answer that is not a readable list of paths becomes a version.
func TestDiscoverFailsClosed(t *testing.T) {
	for name, tc := range map[string]struct {
		status      int
		ctype, body string
		want        error
		text        string
	}{
		"unauthorized": {http.StatusUnauthorized, "application/json", `{}`, ErrUnauthorized, ""},
		"server error": {http.StatusInternalServerError, "text/plain", `boom`, ErrUnavailable, ""},
		"not json":     {http.StatusOK, "text/html", `<html>`, ErrDecode, ""},
		"no paths":     {http.StatusOK, "application/json", `{"openapi":"3.0.3","paths":{}}`, ErrDecode, "no paths"},
		"unknown versions": {http.StatusOK, "application/json",
			`{"info":{"x-slurm":{"release":"27.11.0"}},"paths":{"/slurm/v0.0.46/ping":{},"/slurm/v0.0.47/ping":{}}}`, nil,
			"Slurm 27.11.0) serves API versions [v0.0.46 v0.0.47], none of which"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, tc.status, tc.ctype, tc.body)
			c, v, err := Connect(context.Background(), Config{URL: srv.URL, Tokens: StaticToken{User: "u", Value: "t"}})
			if err == nil || c != nil || v != "" {
				t.Fatalf("Connect = %v, %q, %v; want an error", c, v, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v is not %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q does not say %q", err, tc.text)
			}
		})
	}
}

func serve(t *testing.T, status int, ctype, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi/v3" || r.Header.Get("X-SLURM-USER-TOKEN") != "t" {
			http.Error(w, "unexpected request "+r.URL.Path, http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}
