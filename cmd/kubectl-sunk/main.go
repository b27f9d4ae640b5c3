// Command kubectl-sunk is the `kubectl sunk` plugin (internal/kubectlsunk): installed on PATH,
// kubectl runs it as `kubectl sunk nodes|health|drain|resume`.
package main

import (
	"os"

	"sunk.dev/sunk/internal/kubectlsunk"
)

func main() {
	if err := kubectlsunk.NewCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}
