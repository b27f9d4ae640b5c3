package charts

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// generatedCopies maps each file the sunk chart carries to the generated file it copies
// (`make generate` writes both). CRDs live in crds/; the operator's and the syncer's RBAC rules
// and the webhook definitions are read by the templates from files/.
func generatedCopies(t *testing.T) map[string]string {
	t.Helper()
	copies := map[string]string{
		"sunk/files/operator-role.yaml": "../config/rbac/role.yaml",
		"sunk/files/syncer-role.yaml":   "../config/rbac/syncer/role.yaml",
		"sunk/files/webhook.yaml":       "../config/webhook/manifests.yaml",
	}
	crds, err := filepath.Glob("../config/crd/bases/*.yaml")
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, c := range crds {
		copies[filepath.Join("sunk/crds", filepath.Base(c))] = c
	}
	return copies
}

// TestChartCopiesMatchGeneratedManifests fails when config/ changed (controller-gen) and the
// chart was not refreshed, or when the chart carries a CRD that config/ no longer has.
func TestChartCopiesMatchGeneratedManifests(t *testing.T) {
	copies := generatedCopies(t)
	for chartFile, source := range copies {
		want, err := os.ReadFile(source)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(chartFile)
		if err != nil {
			t.Errorf("%v (run make generate)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("charts/%s differs from %s (run make generate)", chartFile, source)
		}
	}
	inChart, err := filepath.Glob("sunk/crds/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range inChart {
		if _, ok := copies[f]; !ok {
			t.Errorf("charts/%s has no source in config/crd/bases (run make generate)", f)
		}
	}
}
