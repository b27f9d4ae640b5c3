// Confining the Lua sandbox's child process with the Landlock LSM.

package validation

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// exitSandboxConfine is the child's exit code when it could not confine itself.
const exitSandboxConfine = 4

// confineSandbox takes from this process, every thread of it, all access to files (open,
// create, execute, connect to a socket by path), TCP and UDP, and signals and abstract sockets
// outside it, with the Landlock LSM. The child has read nothing yet and holds only its stdin,
// stdout and stderr: a script that got past the Lua environment (render.JobSubmitLua) would
// still find nothing to read (the operator's ServiceAccount token, the webhook's TLS key are
// files) and nowhere to connect. Best effort: a kernel without Landlock (before 5.13, or with
// the LSM off) leaves the child as it was; SandboxConfinement tells the operator's log which.
func confineSandbox() error { return landlock.V9.BestEffort().Restrict() }

// SandboxConfinement says, for the operator's start-up log, how the Lua sandbox's child is
// confined on this kernel.
func SandboxConfinement() string {
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil || v < 1 {
		return fmt.Sprintf("no Landlock on this kernel (%v): the child has the Lua environment, its resource limits and an empty process environment only", err)
	}
	return fmt.Sprintf("Landlock ABI %d: the child can open no file, reach no TCP or UDP port and signal no other process", v)
}
