// Package golden compares test output with golden files.
package golden

import (
	"os"
	"testing"
)

// Check compares got with the file at path, or rewrites the file when update is set. rerun
// is the command that rewrites it, for the failure message.
func Check(t testing.TB, path, got string, update bool, rerun string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s creates it)", err, rerun)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (%s rewrites it):\n--- got\n%s", path, rerun, got)
	}
}
