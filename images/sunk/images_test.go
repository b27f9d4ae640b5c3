// Package sunkimage holds no code: its tests keep the one build of sunk's own image (build.sh,
// which hack/images.sh runs for `make images` and the test bed) in step with the charts
// (docs/images.md).
package sunkimage

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func match(t *testing.T, what, re, text string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no match for %s", what, re)
	}
	return m[1]
}

// hack/images.sh makes the tree with build.sh, stamped by it, and starts the operator.
func TestOfflineBuildRunsBuildSh(t *testing.T) {
	offline := read(t, filepath.Join("..", "..", "hack", "images.sh"))
	if !strings.Contains(offline, `sh images/sunk/build.sh "$r"`) {
		t.Error("hack/images.sh does not build sunk's tree with images/sunk/build.sh")
	}
	if !strings.Contains(offline, `"$SUNK_ROOT/images/sunk/build.sh"`) {
		t.Error("hack/images.sh's stamp of sunk's image does not cover build.sh: editing it would not rebuild the image")
	}
	if entry := match(t, "hack/images.sh sunk.dev/sunk", `sunk\.dev/sunk:local "\$SUNK_IMAGES/sunk\.tar" '(\[.*\])'`, offline); entry != `["/usr/local/bin/sunk-operator"]` {
		t.Errorf("sunk's image starts %s, want the operator", entry)
	}
}

// The image runs as the user build.sh writes into /etc/passwd, which the sunk chart's pods run as.
func TestImageUserIsTheChartsUser(t *testing.T) {
	user := match(t, "build.sh's passwd", `sunk:x:(\d+):\d+:`, read(t, "build.sh"))
	values := read(t, "../../charts/sunk/values.yaml")
	if got := match(t, "charts/sunk/values.yaml runAsUser", `(?m)^\s+runAsUser: (\d+)$`, values); got != user {
		t.Errorf("the sunk chart runs its pods as %s, the image's user is %s", got, user)
	}
}
