// Package sunkimage holds no code: its tests keep the two builds of sunk's own image in step —
// the Dockerfile for users and hack/images.sh for the offline test bed, which both run
// build.sh — with go.mod and the charts (docs/images.md).
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

// Both builds make the tree with build.sh and start the same program.
func TestDockerfileAndOfflineBuildAgree(t *testing.T) {
	df := read(t, "Dockerfile")
	offline := read(t, filepath.Join("..", "..", "hack", "images.sh"))
	if !strings.Contains(df, "sh images/sunk/build.sh /out") {
		t.Error("the Dockerfile does not build its tree with images/sunk/build.sh")
	}
	if !strings.Contains(offline, `sh images/sunk/build.sh "$r"`) {
		t.Error("hack/images.sh does not build sunk's tree with images/sunk/build.sh")
	}
	if !strings.Contains(offline, `"$SUNK_ROOT/images/sunk/build.sh"`) {
		t.Error("hack/images.sh's stamp of sunk's image does not cover build.sh: editing it would not rebuild the image")
	}
	dfEntry := match(t, "Dockerfile ENTRYPOINT", `(?m)^ENTRYPOINT (\[.*\])$`, df)
	offEntry := match(t, "hack/images.sh sunk.dev/sunk", `sunk\.dev/sunk:local "\$SUNK_IMAGES/sunk\.tar" '(\[.*\])'`, offline)
	if dfEntry != offEntry {
		t.Errorf("entrypoints differ: Dockerfile %s, hack/images.sh %s", dfEntry, offEntry)
	}
}

// The builder runs go.mod's Go release, for both modules.
func TestDockerfileGoIsGoMods(t *testing.T) {
	from := match(t, "Dockerfile FROM golang", `(?m)^FROM golang:(\d+\.\d+)-`, read(t, "Dockerfile"))
	for _, mod := range []string{"../../go.mod", "../../scheduler/go.mod"} {
		if v := match(t, mod, `(?m)^go (\d+\.\d+)`, read(t, mod)); v != from {
			t.Errorf("%s says go %s, the Dockerfile builds with golang:%s", mod, v, from)
		}
	}
}

// The image runs as the user build.sh writes into /etc/passwd, which the sunk chart's pods run as.
func TestImageUserIsTheChartsUser(t *testing.T) {
	user := match(t, "Dockerfile USER", `(?m)^USER (\d+):\d+$`, read(t, "Dockerfile"))
	if !strings.Contains(read(t, "build.sh"), "sunk:x:"+user+":"+user+":") {
		t.Errorf("build.sh's passwd has no user %s", user)
	}
	values := read(t, "../../charts/sunk/values.yaml")
	if got := match(t, "charts/sunk/values.yaml runAsUser", `(?m)^\s+runAsUser: (\d+)$`, values); got != user {
		t.Errorf("the sunk chart runs its pods as %s, the image's user is %s", got, user)
	}
}
