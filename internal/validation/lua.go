package validation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	lua "github.com/yuin/gopher-lua"
	luaparse "github.com/yuin/gopher-lua/parse"

	"sunk.dev/sunk/internal/render"
)

// luaRunTimeout bounds a job_submit.lua's top-level code at admission: slurmctld runs it at
// every (re)load, so a script that loops there would hang the controller.
const luaRunTimeout = time.Second

// luaTooLong is the verdict on a script whose top-level code runs past luaRunTimeout.
var luaTooLong = fmt.Sprintf("job_submit.lua's top-level code did not finish within %v: slurmctld would hang loading it", luaRunTimeout)

// wallClockBudget bounds a run in the calling process by wall-clock time.
func wallClockBudget() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), luaRunTimeout)
}

// requiredLuaFunctions are what Slurm's job_submit/lua plugin looks up at load
// (job_submit_lua.c req_fxns): without either, slurmctld fails to start.
var requiredLuaFunctions = []string{"slurm_job_submit", "slurm_job_modify"}

// ValidateJobSubmitLua checks a job_submit.lua as slurmctld would load it: it parses with a
// Lua 5.1 parser (Debian's Slurm links liblua5.1), and the file sunk renders for it
// (render.JobSubmitLua: the script in a sandbox without io, os but its clocks, package,
// debug, load or getfenv) runs to the end within a second (of CPU, in the sandbox process)
// against a stub of the `slurm` table, and leaves both functions Slurm requires defined.
// Since the sandbox is the one slurmctld runs the script in, a script that reaches for what
// it lacks fails here as it would fail there. After ServeLuaSandbox the check runs in a child
// process with bounded memory and CPU (luaprocess.go).
func ValidateJobSubmitLua(src string) error { return validateLua(src) }

// luaMaxRep bounds string.rep's result in the sandbox: one call would otherwise allocate
// whatever the script asks for before any limit could look.
const luaMaxRep = 1 << 20

// validateLuaHere is ValidateJobSubmitLua in this process, its run bounded by budget's context.
func validateLuaHere(src string, budget func() (context.Context, context.CancelFunc)) error {
	if _, err := luaparse.Parse(strings.NewReader(src), "job_submit.lua"); err != nil {
		return fmt.Errorf("job_submit.lua does not parse: %s", strings.TrimSpace(err.Error()))
	}
	L := slurmctldLua()
	defer L.Close()
	ctx, cancel := budget()
	defer cancel()
	L.SetContext(ctx)
	if err := L.DoString(render.JobSubmitLua(src)); err != nil {
		if ctx.Err() != nil {
			return errors.New(luaTooLong)
		}
		return fmt.Errorf("job_submit.lua's top-level code fails, so slurmctld would not start: %s (the script runs without io, os but its clocks, require, load or getfenv)", firstLine(err.Error()))
	}
	for _, fn := range requiredLuaFunctions {
		if L.GetGlobal(fn).Type() != lua.LTFunction {
			return fmt.Errorf("job_submit.lua defines no function %s: Slurm requires both %s, or slurmctld does not start", fn, strings.Join(requiredLuaFunctions, " and "))
		}
	}
	return nil
}

// slurmctldLua is a Lua state with the globals render.JobSubmitLua's wrapper uses, as in
// slurmctld, but for io, os's other functions and package, which neither the wrapper nor the
// script may use: should the sandbox leak, this process's files and commands stay out of reach.
func slurmctldLua() *lua.LState {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 256, RegistrySize: 1024, RegistryMaxSize: 64 * 1024})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine}, {lua.OsLibName, lua.OpenOs}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, unsafe := range []string{"dofile", "loadfile", "require", "module"} {
		L.SetGlobal(unsafe, lua.LNil)
	}
	if full, ok := L.GetGlobal(lua.OsLibName).(*lua.LTable); ok {
		clocks := L.NewTable()
		for _, name := range []string{"time", "clock", "date", "difftime"} {
			clocks.RawSetString(name, full.RawGetString(name))
		}
		L.SetGlobal(lua.OsLibName, clocks)
	}
	if str, ok := L.GetGlobal(lua.StringLibName).(*lua.LTable); ok {
		rep := str.RawGetString("rep")
		str.RawSetString("rep", L.NewFunction(func(L *lua.LState) int {
			if n := L.OptInt(2, 0); n > 0 && n > luaMaxRep/max(len(L.CheckString(1)), 1) {
				L.RaiseError("string.rep: a result over %d bytes at load", luaMaxRep)
			}
			L.Insert(rep, 1)
			L.Call(L.GetTop()-1, 1)
			return 1
		}))
	}
	L.SetGlobal("slurm", slurmStub(L))
	return L
}

// slurmStub is the `slurm` table a script sees at load time. Slurm fills it with functions
// (lower case: log_info, log_user, ...) and constants (upper case: SUCCESS, ESLURM_*, NO_VAL);
// the stub answers any lower-case name with a function that does nothing and any upper-case
// name with a number, so that code which runs under Slurm runs here.
func slurmStub(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	for k, v := range map[string]float64{"SUCCESS": 0, "ERROR": -1, "FAILURE": -1, "NO_VAL": 0xfffffffe,
		"NO_VAL16": 0xfffe, "NO_VAL8": 0xfe, "NO_VAL64": 0xfffffffffffffffe, "INFINITE": 0xffffffff, "INFINITE64": 0xffffffffffffffff} {
		t.RawSetString(k, lua.LNumber(v))
	}
	noop := L.NewFunction(func(*lua.LState) int { return 0 })
	meta := L.NewTable()
	meta.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		name := L.CheckString(2)
		if name != "" && unicode.IsUpper(rune(name[0])) {
			L.Push(lua.LNumber(0))
		} else {
			L.Push(noop)
		}
		return 1
	}))
	L.SetMetatable(t, meta)
	return t
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
