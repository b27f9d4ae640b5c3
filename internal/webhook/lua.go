package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	lua "github.com/yuin/gopher-lua"
	luaparse "github.com/yuin/gopher-lua/parse"
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
// Lua 5.1 parser (Debian's Slurm links liblua5.1), its top-level code runs to the end within
// a second (of CPU, in the sandbox process) against a stub of the `slurm` table, and it
// defines both functions Slurm requires.
// The sandbox opens no io, os or package library: the script cannot reach this process's
// files or environment, and a script that needs them at load time is refused. After
// ServeLuaSandbox the check runs in a child process with bounded memory and CPU
// (luaprocess.go).
func ValidateJobSubmitLua(src string) error { return validateLua(src) }

// luaMaxRep bounds string.rep's result in the sandbox: one call would otherwise allocate
// whatever the script asks for before any limit could look.
const luaMaxRep = 1 << 20

// validateLuaHere is ValidateJobSubmitLua in this process, its run bounded by budget's context.
func validateLuaHere(src string, budget func() (context.Context, context.CancelFunc)) error {
	if _, err := luaparse.Parse(strings.NewReader(src), "job_submit.lua"); err != nil {
		return fmt.Errorf("job_submit.lua does not parse: %s", strings.TrimSpace(err.Error()))
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 256, RegistrySize: 1024, RegistryMaxSize: 64 * 1024})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, unsafe := range []string{"dofile", "loadfile", "load", "loadstring", "require", "module"} {
		L.SetGlobal(unsafe, lua.LNil)
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
	ctx, cancel := budget()
	defer cancel()
	L.SetContext(ctx)
	if err := L.DoString(src); err != nil {
		if ctx.Err() != nil {
			return errors.New(luaTooLong)
		}
		return fmt.Errorf("job_submit.lua's top-level code fails, so slurmctld would not start: %s (at admission io, os and require are not available)", firstLine(err.Error()))
	}
	for _, fn := range requiredLuaFunctions {
		if L.GetGlobal(fn).Type() != lua.LTFunction {
			return fmt.Errorf("job_submit.lua defines no function %s: Slurm requires both %s, or slurmctld does not start", fn, strings.Join(requiredLuaFunctions, " and "))
		}
	}
	return nil
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
