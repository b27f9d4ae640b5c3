package validation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A job_submit.lua's top-level code runs at admission. gopher-lua checks its context between
// instructions, which bounds loops, but one call can allocate or compute without end
// (string.rep("x", 2^40), a pattern that backtracks over a long string). So the operator runs
// the check in a child process, its own binary re-executed: killed after luaProcessTimeout,
// its address space and CPU time limited by the kernel, its heap watched, and first in line
// for the OOM killer, so that a hostile script costs a failed admission, never the operator.
// The child starts with an empty environment and confines itself before it reads the script
// (confineSandbox): no file, no network.

const (
	// luaSandboxEnv marks a process started as the sandbox.
	luaSandboxEnv = "SUNK_LUA_SANDBOX"
	// luaProcessTimeout bounds a child's whole life: start, the 1 s run, the answer. A single
	// Lua call the run's own bound cannot interrupt (a pattern backtracking over a long string)
	// ends here.
	luaProcessTimeout = 3 * time.Second
	// luaAddressSpace is the child's RLIMIT_AS: a Go binary of this size reserves about a
	// GiB of address space to start (1 GiB is too little for the test binary); one
	// allocation past the limit fails instead of reaching the pod's memory limit.
	luaAddressSpace = 2 << 30
	// luaHeapLimit is the heap the child's watchdog allows before it gives up.
	luaHeapLimit = 128 << 20
	// luaCPUSeconds is the child's RLIMIT_CPU, a backstop behind luaProcessTimeout.
	luaCPUSeconds = 4
	// exitLuaMemory is the child's exit code when the watchdog stops it.
	exitLuaMemory = 3
)

var (
	// sandboxExe is the binary to re-execute; empty: scripts run in this process.
	sandboxExe string
	// luaResults caches the outcome per script (sha256): the controller re-checks every
	// spec at each reconcile, and a script is the same far more often than not.
	luaResults   sync.Map // [32]byte -> string ("" passes)
	luaResultsMu sync.Mutex
	luaResultsN  int
)

// ServeLuaSandbox must be the first call of main (and of TestMain) in a binary that validates
// SlurmClusters. In a process started as the sandbox it checks the script on stdin, writes the
// outcome to stdout and exits. Otherwise it returns, and from then on ValidateJobSubmitLua runs
// each script in such a child process. Without this call scripts run in the calling process,
// bounded in time only.
func ServeLuaSandbox() {
	if os.Getenv(luaSandboxEnv) != "1" {
		if exe, err := os.Executable(); err == nil {
			sandboxExe = exe
		}
		return
	}
	if err := confineSandbox(); err != nil {
		fmt.Fprint(os.Stderr, err)
		os.Exit(exitSandboxConfine)
	}
	go watchHeap()
	src, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		os.Exit(1)
	}
	if err := validateLuaHere(string(src), cpuTimeBudget); err != nil {
		fmt.Print(err.Error())
	}
	os.Exit(0)
}

// watchHeap stops the sandbox once the script's heap passes luaHeapLimit.
func watchHeap() {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for range time.Tick(time.Millisecond) {
		if metrics.Read(s); s[0].Value.Uint64() > luaHeapLimit {
			os.Exit(exitLuaMemory)
		}
	}
}

// cpuTimeBudget bounds the sandbox's run by the CPU time the process has used, not by the
// clock: on a loaded node a script that stays well inside its memory would otherwise be
// refused for time, or one that outgrows its memory for the wrong reason (seen in CI).
func cpuTimeBudget() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				var ru unix.Rusage
				if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil &&
					time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) > luaRunTimeout {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

// validateLua checks a script in a sandbox process when ServeLuaSandbox enabled it, else here.
func validateLua(src string) error {
	if sandboxExe == "" {
		return validateLuaHere(src, wallClockBudget)
	}
	key := sha256.Sum256([]byte(src))
	if msg, ok := luaResults.Load(key); ok {
		return errorOrNil(msg.(string))
	}
	msg, err := validateLuaInChild(src)
	if err != nil {
		return err // the sandbox itself failed: not cached, the next check tries again
	}
	luaResultsMu.Lock()
	if luaResultsN++; luaResultsN > 256 {
		luaResults.Clear()
		luaResultsN = 1
	}
	luaResultsMu.Unlock()
	luaResults.Store(key, msg)
	return errorOrNil(msg)
}

func errorOrNil(msg string) error {
	if msg == "" {
		return nil
	}
	return errors.New(msg)
}

// validateLuaInChild runs the check in a child process and returns its verdict ("" passes);
// the error is for a sandbox that could not run at all.
func validateLuaInChild(src string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), luaProcessTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sandboxExe)
	// Nothing of the operator's environment: the sandbox needs none of it.
	cmd.Env = []string{luaSandboxEnv + "=1", "GOMAXPROCS=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 512}
	var out bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &out, n: 4096}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting the Lua sandbox: %w", err)
	}
	// The child reads the script only once it is written, so the limits are in place first.
	pid := cmd.Process.Pid
	limitErr := errors.Join(
		unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: luaAddressSpace, Max: luaAddressSpace}, nil),
		unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: luaCPUSeconds, Max: luaCPUSeconds}, nil),
	)
	// Best effort: where /proc is read-only the address-space limit still holds.
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("1000"), 0)
	if limitErr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", fmt.Errorf("limiting the Lua sandbox: %w", limitErr)
	}
	_, _ = io.WriteString(stdin, src)
	_ = stdin.Close()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return luaTooLong, nil
	case errors.As(err, &exit) && exit.ExitCode() == exitSandboxConfine:
		return "", fmt.Errorf("the Lua sandbox could not confine itself: %s", firstLine(stderr.String()))
	case errors.As(err, &exit) && exit.ExitCode() == exitLuaMemory:
		return fmt.Sprintf("job_submit.lua's top-level code used more than %d MiB at load: slurmctld would load it on every start and reconfigure", luaHeapLimit>>20), nil
	case errors.As(err, &exit):
		return fmt.Sprintf("job_submit.lua's top-level code exhausted the admission sandbox (%v: %s): it allocates or computes without bound at load", exit, firstLine(stderr.String())), nil
	case err != nil:
		return "", fmt.Errorf("the Lua sandbox: %w", err)
	}
	return out.String(), nil
}

// limitedWriter keeps the first n bytes.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	l.n -= k
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	return len(p), nil
}
