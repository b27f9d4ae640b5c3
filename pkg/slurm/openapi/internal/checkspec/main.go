// Command checkspec reads an OpenAPI document on stdin and fails unless it is the slurmctld spec
// of the data parser version named by its argument, so a broken fetch is never checked in.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: checkspec VERSION < openapi.json")
		os.Exit(2)
	}
	var spec struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		fmt.Fprintln(os.Stderr, "checkspec: not JSON:", err)
		os.Exit(1)
	}
	prefix := "/slurm/" + os.Args[1] + "/"
	n := 0
	for p := range spec.Paths {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	if !strings.HasPrefix(spec.OpenAPI, "3.") || n < 10 {
		fmt.Fprintf(os.Stderr, "checkspec: openapi %q with %d paths under %s\n", spec.OpenAPI, n, prefix)
		os.Exit(1)
	}
}
