package wellknown

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The versions whose keys workloads.go copies are the versions the test bed runs
// (hack/workload-controllers.sh builds and installs those controllers for the end-to-end test):
// a version bumped in one place only would test labels the code does not read.
func TestWorkloadVersionsAreTheTestBeds(t *testing.T) {
	src, err := os.ReadFile("workloads.go")
	if err != nil {
		t.Fatal(err)
	}
	bed, err := os.ReadFile(filepath.Join("..", "..", "hack", "workload-controllers.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, module := range map[string]string{"jobset": "sigs.k8s.io/jobset", "lws": "sigs.k8s.io/lws"} {
		read := regexp.MustCompile(`\(` + regexp.QuoteMeta(module) + ` (v[0-9.]+),`).FindSubmatch(src)
		run := regexp.MustCompile(`declare -A VERSION=\(.*\[` + name + `\]=(v[0-9.]+)`).FindSubmatch(bed)
		if read == nil || run == nil {
			t.Fatalf("%s: no version in workloads.go (%q) or in the test bed's script (%q)", module, read, run)
		}
		if string(read[1]) != string(run[1]) {
			t.Errorf("%s: workloads.go reads %s's keys, the test bed runs %s", module, read[1], run[1])
		}
	}
}
