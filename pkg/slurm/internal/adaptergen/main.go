// Command adaptergen renders pkg/slurm's per-version api (see pkg/slurm/adapter.go) from
// adapter.go.tmpl, one zz_adapter_<pkg>.go for each row of versions, and removes the files of
// versions no longer in the table. `go generate ./pkg/slurm` (and `make generate`) runs it from
// pkg/slurm; it needs nothing but the Go toolchain.
//
// A new REST API version: its spec and generated client (hack/gen-slurm-openapi.sh), a row in
// versions below, `go generate ./pkg/slurm`, and a constant and a case in slurm.New. Where the
// new version's build fails, its API differs from the row it was copied from: a new field of
// version and a branch in the template say how.
package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// version is one REST API data parser version and how its API differs from the others where
// the template cannot hide it. A new version whose answers and requests have the shape of an
// earlier one's is a row copied from it; a difference of a new kind is a new field here and a
// branch in the template.
type version struct {
	Name string // as slurmrestd names it: v0.0.42
	Pkg  string // the generated client's package under pkg/slurm/openapi: v0042

	// UnixUpdateTime: update_time takes a UNIX timestamp. v0.0.41's parser rejects one (error
	// 9202) and reads slurmrestd's local time.
	UnixUpdateTime bool
	// PingBooleans: a ping reports responding and primary; v0.0.41 reports pinged "UP" and mode
	// "primary".
	PingBooleans bool
	// NoPingMode: a ping has no mode (v0.0.45 dropped it; primary says as much); Mode stays "".
	NoPingMode bool
	// NoJobExclusive: a job's answer does not say whether it is exclusive (v0.0.45 answers
	// shared [] for an exclusive job and has no field that replaced it); Job.Exclusive stays
	// false. A submit's shared=none still makes the job exclusive.
	NoJobExclusive bool
	// ExclusiveFlag: jobs have an exclusive field ("true"), which a submit sets and a job's
	// exclusivity is read from besides shared=none; later versions say shared=none only.
	ExclusiveFlag bool
	// NodeTopology: a node update takes topology_str (Slurm 25.05 and later), which moves
	// the node in the topology without a reconfigure, and a node reports its topology.
	NodeTopology bool
}

var versions = []version{
	{Name: "v0.0.41", Pkg: "v0041", ExclusiveFlag: true},
	{Name: "v0.0.42", Pkg: "v0042", UnixUpdateTime: true, PingBooleans: true},
	{Name: "v0.0.43", Pkg: "v0043", UnixUpdateTime: true, PingBooleans: true, NodeTopology: true},
	{Name: "v0.0.44", Pkg: "v0044", UnixUpdateTime: true, PingBooleans: true, NodeTopology: true},
	{Name: "v0.0.45", Pkg: "v0045", UnixUpdateTime: true, PingBooleans: true, NoPingMode: true, NoJobExclusive: true, NodeTopology: true},
}

// P is the version as the generated names spell it: V0042.
func (v version) P() string { return strings.ToUpper(v.Pkg[:1]) + v.Pkg[1:] }

// Op is the data of the template "body", which reads the answer of operation op.
func (v version) Op(op string) struct {
	V  version
	Op string
} {
	return struct {
		V  version
		Op string
	}{v, op}
}

//go:embed adapter.go.tmpl
var text string

var tmpl = template.Must(template.New("adapter").Parse(text))

// fileName is the generated file of v.
func fileName(v version) string { return "zz_adapter_" + v.Pkg + ".go" }

// render returns v's file, gofmt'ed.
func render(v version) ([]byte, error) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", v.Name, err)
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", v.Name, err, b.Bytes())
	}
	return src, nil
}

// generate writes every version's file into dir (pkg/slurm) and removes stale ones.
func generate(dir string) error {
	keep := map[string]bool{}
	for _, v := range versions {
		src, err := render(v)
		if err != nil {
			return err
		}
		keep[fileName(v)] = true
		if err := os.WriteFile(filepath.Join(dir, fileName(v)), src, 0o644); err != nil {
			return err
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "zz_adapter_*.go"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if !keep[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func main() {
	if err := generate("."); err != nil {
		fmt.Fprintln(os.Stderr, "adaptergen:", err)
		os.Exit(1)
	}
}
