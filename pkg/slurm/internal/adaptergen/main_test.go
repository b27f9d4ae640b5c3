package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent: the checked-in zz_adapter_*.go files are what the template and
// the table render (else: go generate ./pkg/slurm).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	dir := filepath.Join("..", "..")
	want := map[string]bool{}
	for _, v := range versions {
		src, err := render(v)
		if err != nil {
			t.Fatal(err)
		}
		want[fileName(v)] = true
		got, err := os.ReadFile(filepath.Join(dir, fileName(v)))
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s is not what adapter.go.tmpl renders for %s (%v): run go generate ./pkg/slurm", fileName(v), v.Name, err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "zz_adapter_*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s belongs to no version of the table: run go generate ./pkg/slurm", filepath.Base(f))
		}
	}
}
