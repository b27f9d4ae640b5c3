// Command sunk-container is the helper sunk's SPANK plugin (images/slurm/spank) runs on a
// compute node, as root, to give a job step a container (docs/containers.md). The logic is in
// internal/container; this file only dispatches and prints the one-line error the job's
// output shows.
//
//	sunk-container check|prepare|remove --job-id=J --step-id=S --uid=U --gid=G [--gids=G,...] --container-...
//
// check prints what the flags say (JSON). prepare pulls the image into the node's cache (or
// takes --rootfs=DIR, an unpacked image), builds the container's mount namespace in a holder
// process and prints "mntns=/proc/PID/ns/mnt", "root=/proc/PID/root" and "environ=FILE" (the
// image's environment); the holder lives until prepare's standard input
// reaches end of file (the plugin holds that pipe for the step). remove deletes the step's (or
// the named) container once its holder ended. ns-init is the holder; reap, started by prepare,
// removes an unnamed container once its step let the holder go. remove-job --job-id=J (the
// job's epilog) removes every container of the job.
//
// --node-conf=FILE (plugstack.conf's arg=) stands for the node's settings in FILE; without FILE
// the node has no containers and every command but remove-job fails with "containers are not
// enabled on this node".
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
		return fmt.Errorf("usage: sunk-container check|prepare|remove FLAGS")
	}
	if argv[0] == "reap" && len(argv) == 2 {
		// Detached from the step (prepare started it); a node's shutdown ends it with SIGKILL.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		return container.Reap(argv[1])
	}
	if argv[0] == "ns-init" {
		// fd 3: the spec, from prepare (internal/container.CreateNS).
		return container.NSInit(os.NewFile(3, "spec"), os.Stdin)
	}
	// plugstack.conf's --node-conf=FILE: the node's settings, and whether it has containers.
	flags, err := container.ExpandNodeConf(argv[1:])
	if argv[0] == "remove-job" {
		if errors.Is(err, container.ErrNotEnabled) {
			return nil // no container can have been made here
		}
		if err != nil {
			return err
		}
		job, state, err := container.ParseJobArgs(flags)
		if err != nil {
			return err
		}
		return container.RemoveJob(state, job)
	}
	if err != nil {
		return err
	}
	a, err := container.ParseArgs(flags)
	if err != nil {
		return err
	}
	switch argv[0] {
	case "check":
		return json.NewEncoder(os.Stdout).Encode(a)
	case "prepare":
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		p, err := container.Prepare(exe, a)
		if err != nil {
			return err
		}
		// The plugin enters the namespace, then chroots to the holder's root (the namespace's
		// root mount is the container's only when the helper was not chrooted itself), and
		// gives the tasks the image's environment.
		fmt.Printf("mntns=%s/ns/mnt\nroot=%s/root\nenviron=%s\n", p.Holder, p.Holder, p.Environ)
		return nil
	case "remove":
		return container.Remove(a)
	default:
		return fmt.Errorf("unknown command %q (check|prepare|remove)", argv[0])
	}
}
