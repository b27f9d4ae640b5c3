package container

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseNodeConf(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"# NodeSet gpu\n\n--insecure-registry=reg:5000,other\n  --cache-dir=/c  \n", []string{"--insecure-registry=reg:5000,other", "--cache-dir=/c"}, ""},
		{"--container-image=x\n", nil, `line 1: "--container-image=x" is not a node setting`},
		{"# ok\ninsecure-registry=reg\n", nil, `line 2: "insecure-registry=reg" is not a node setting`},
	} {
		got, err := ParseNodeConf(tc.text)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseNodeConf(%q): err = %v, want %q", tc.text, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseNodeConf(%q) = %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
}

func TestExpandNodeConf(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("--insecure-registry=reg:5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ExpandNodeConf([]string{"--job-id=1", "--node-conf=" + conf, "--container-image=x"})
	if want := []string{"--job-id=1", "--insecure-registry=reg:5000", "--container-image=x"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ExpandNodeConf = %q, %v; want %q", got, err, want)
	}
	// The one line a user sees on a node of a NodeSet without containers.
	_, err = ExpandNodeConf([]string{"--node-conf=" + filepath.Join(dir, "missing")})
	if !errors.Is(err, ErrNotEnabled) || err.Error() != "containers are not enabled on this node" {
		t.Errorf("a missing node settings file: err = %v, want ErrNotEnabled", err)
	}
	// Without --node-conf (a node configured by hand), argv is as given.
	if got, err := ExpandNodeConf([]string{"--job-id=1"}); err != nil || !slices.Equal(got, []string{"--job-id=1"}) {
		t.Errorf("ExpandNodeConf without --node-conf = %q, %v", got, err)
	}
}
