// Package docs keeps the documentation true to the tree: the tests here fail when a Go
// package or command appears that docs/architecture.md or the README's Layout does not name
// (layout_test.go), when the docs name a chart value or a CRD field that does not exist or a
// chart README's value table misses a value (values_test.go, crdfields_test.go), and when
// docs/reference.md misses a label, annotation, taint, condition or finalizer key sunk defines
// or names one it does not (reference_test.go).
package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goPackages are the directories under the roots (relative to the repository) that hold
// non-test Go files, test helpers and generated code excepted by the caller.
func goPackages(t *testing.T, roots ...string) []string {
	t.Helper()
	var out []string
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join("..", root), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			files, _ := filepath.Glob(filepath.Join(p, "*.go"))
			for _, f := range files {
				if !strings.HasSuffix(f, "_test.go") {
					out = append(out, filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator))))
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestArchitectureNamesEveryPackage: docs/architecture.md names every command and package of
// both modules (the generated REST clients under pkg/slurm/openapi as one entry).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	arch := read(t, "architecture.md")
	for _, p := range goPackages(t, "cmd", "internal", "pkg", "scheduler/cmd", "scheduler/plugin") {
		if strings.HasPrefix(p, "pkg/slurm/openapi/") {
			p = "pkg/slurm/openapi/"
		}
		if !strings.Contains(arch, "`"+p) {
			t.Errorf("docs/architecture.md does not name %s", p)
		}
	}
}

// TestReadmeLayoutNamesEveryCommandAndPackage: the README's Layout block names every command
// (cmd/*) and every package directly under internal/ and pkg/.
func TestReadmeLayoutNamesEveryCommandAndPackage(t *testing.T) {
	readme := read(t, "../README.md")
	start := strings.Index(readme, "## Layout")
	if start < 0 {
		t.Fatal("README.md has no Layout section")
	}
	layout := readme[start:]
	if end := strings.Index(layout[3:], "\n## "); end > 0 {
		layout = layout[:end+3]
	}
	for _, root := range []string{"cmd", "internal", "pkg"} {
		entries, err := os.ReadDir(filepath.Join("..", root))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !strings.Contains(layout, e.Name()) {
				t.Errorf("README.md's Layout does not name %s/%s", root, e.Name())
			}
		}
	}
}
