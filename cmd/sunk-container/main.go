// Command sunk-container is the helper sunk's SPANK plugin (images/slurm/spank) runs on a
// compute node, as root, to give a job step a container (docs/containers.md). The logic is in
// internal/container; this file only dispatches and prints the one-line error the job's
// output shows.
//
//	sunk-container check --job-id=J --step-id=S --uid=U --gid=G [--gids=G,...] --container-...
//
// check reads the flags as prepare will and prints what it understood (JSON): the plugin's
// contract, testable without a node. prepare (pull, unpack, make the container's mount
// namespace) and remove are not written yet.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"sunk.dev/sunk/internal/container"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		// One line: the plugin copies it into the step's error output.
		fmt.Fprintf(os.Stderr, "sunk-container: %v\n", err)
		os.Exit(1)
	}
}

func run(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("usage: sunk-container check|prepare FLAGS")
	}
	switch argv[0] {
	case "check":
		a, err := container.ParseArgs(argv[1:])
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(a)
	case "prepare", "remove":
		if _, err := container.ParseArgs(argv[1:]); err != nil {
			return err
		}
		return fmt.Errorf("%s is not implemented yet (docs/containers.md, Not yet)", argv[0])
	default:
		return fmt.Errorf("unknown command %q (check|prepare|remove)", argv[0])
	}
}
