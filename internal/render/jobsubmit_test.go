package render

import (
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// slurmctldState is a Lua 5.1 state with the whole standard library, as slurmctld loads a
// job_submit.lua, and a `slurm` table.
func slurmctldState(t *testing.T, src string) *lua.LState {
	t.Helper()
	L := lua.NewState()
	t.Cleanup(L.Close)
	slurm := L.NewTable()
	slurm.RawSetString("SUCCESS", lua.LNumber(0))
	L.SetGlobal("slurm", slurm)
	if err := L.DoString(JobSubmitLua(src)); err != nil {
		t.Fatalf("loading the rendered job_submit.lua: %v", err)
	}
	return L
}

func callString(t *testing.T, L *lua.LState, fn string) string {
	t.Helper()
	if err := L.CallByParam(lua.P{Fn: L.GetGlobal(fn), NRet: 1, Protect: true}); err != nil {
		t.Fatalf("%s: %v", fn, err)
	}
	defer L.Pop(1)
	return L.Get(-1).String()
}

// TestJobSubmitLuaSandbox: what slurmctld calls runs without io, os but its clocks, package,
// require, debug, load or getfenv, although the state Slurm loads it in has them all; the
// script's globals stay in its sandbox; both functions Slurm requires are defined.
func TestJobSubmitLuaSandbox(t *testing.T) {
	L := slurmctldState(t, `
leaked = "top level"
function slurm_job_submit(job_desc, part_list, submit_uid)
  local reached = {}
  for _, name in ipairs({"io", "require", "debug", "package", "module", "load", "loadstring",
      "loadfile", "dofile", "getfenv", "setfenv", "collectgarbage", "newproxy", "print"}) do
    if _G[name] ~= nil or rawget(_G, name) ~= nil then reached[#reached + 1] = name end
  end
  for _, name in ipairs({"execute", "getenv", "remove", "rename", "exit", "tmpname", "setlocale"}) do
    if os[name] ~= nil then reached[#reached + 1] = "os." .. name end
  end
  if getmetatable("").__index.dump == nil then reached[#reached + 1] = "no string library" end
  if type(os.time()) ~= "number" or type(string.format("%d", 1)) ~= "string" then
    reached[#reached + 1] = "no clock or string.format"
  end
  return table.concat(reached, ",") .. "|" .. tostring(slurm.SUCCESS)
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end
`)
	if got := callString(t, L, "slurm_job_submit"); got != "|0" {
		t.Errorf("the script reached %q (want nothing, and slurm.SUCCESS 0)", got)
	}
	if L.GetGlobal("slurm_job_modify").Type() != lua.LTFunction {
		t.Error("slurm_job_modify is not a global function")
	}
	if L.GetGlobal("leaked") != lua.LNil {
		t.Error("a global the script set is in slurmctld's globals")
	}
	if L.GetGlobal("io") == lua.LNil {
		t.Error("the wrapper took io from slurmctld itself")
	}
}

// TestJobSubmitLuaQuoting: a script with the long brackets the wrapper's string uses, and one
// that ends in half of one, reaches Lua whole; errors name the script's own line.
func TestJobSubmitLuaQuoting(t *testing.T) {
	L := slurmctldState(t, "function slurm_job_submit() return \"a]]b]=]c]==]d\" end\nfunction slurm_job_modify() end\n-- ]=")
	if got := callString(t, L, "slurm_job_submit"); got != "a]]b]=]c]==]d" {
		t.Errorf("the script's string: %q", got)
	}
	bad := lua.NewState()
	defer bad.Close()
	bad.SetGlobal("slurm", bad.NewTable())
	err := bad.DoString(JobSubmitLua("function slurm_job_submit() end\n\nundefined_function()\n"))
	if err == nil || !strings.Contains(err.Error(), "jobSubmitLua:3:") {
		t.Errorf("an error on the script's line 3: %v", err)
	}
}
