package container

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLayoutEnv(t *testing.T) {
	dir := t.TempDir()
	blob := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		h := hex.EncodeToString(sum[:])
		if err := os.MkdirAll(filepath.Join(dir, "blobs/sha256"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "blobs/sha256", h), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return "sha256:" + h
	}
	config := blob(`{"architecture":"amd64","config":{"Env":["PATH=/opt/x/bin:/usr/bin","A=b=c"],"Entrypoint":["/init.sh","-v"]}}`)
	manifest := blob(`{"schemaVersion":2,"config":{"digest":"` + config + `"},"layers":[]}`)
	index := `{"manifests":[{"digest":"` + manifest + `","annotations":{"org.opencontainers.image.ref.name":"image"}}]}`
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := layoutConfig(dir, "image")
	if want := (imageConfig{Env: []string{"PATH=/opt/x/bin:/usr/bin", "A=b=c"}, Entrypoint: []string{"/init.sh", "-v"}}); err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("layoutConfig = %q, %v; want %q", c, err, want)
	}
	if _, err := layoutConfig(dir, "other"); err == nil {
		t.Error("layoutConfig of a missing tag: no error")
	}
}

func TestEnvironFile(t *testing.T) {
	got := string(environFile([]string{"PATH=/bin", "MULTI=a\nb", "noequals", "=x", "EMPTY="}))
	if want := "PATH=/bin\x00MULTI=a\nb\x00EMPTY=\x00"; got != want {
		t.Errorf("environFile = %q, want %q", got, want)
	}
}
