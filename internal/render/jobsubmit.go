package render

import "strings"

// jobSubmitSandbox opens the job_submit.lua slurmctld loads. slurmctld gives a job_submit.lua
// the whole of Lua's standard library (io, os, package, debug), in a process that holds the
// cluster's auth and JWT keys; the author of spec.jobSubmitLua must not get that (issue:
// nobody acts as someone else). So the file is this wrapper: it loads the author's script from
// a long string and runs it in an environment of its own, with Slurm's `slurm` table, the
// base functions that reach no other environment, copies of string, table, math and
// coroutine, and os's clocks. Lua 5.1 (Debian's Slurm links liblua5.1): loadstring and setfenv.
// What the script defines there, slurm_job_submit and slurm_job_modify, becomes the globals
// Slurm calls; they keep the sandbox as their environment when Slurm calls them. What the
// script returns is returned to Slurm, which refuses a script that returns a number but 0.
const jobSubmitSandbox = `-- Rendered by sunk from spec.jobSubmitLua (docs/slurmcluster.md, "Job submit Lua").
-- The script runs in an environment of its own: no io, no os but its clocks, no package,
-- require, debug, load, loadstring, loadfile, dofile, getfenv, setfenv or collectgarbage.
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end
local sandbox = {
  slurm = slurm, _VERSION = _VERSION,
  assert = assert, error = error, getmetatable = getmetatable, ipairs = ipairs, next = next,
  pairs = pairs, pcall = pcall, rawequal = rawequal, rawget = rawget, rawset = rawset,
  select = select, setmetatable = setmetatable, tonumber = tonumber, tostring = tostring,
  type = type, unpack = unpack, xpcall = xpcall,
  string = copy(string), table = copy(table), math = copy(math), coroutine = copy(coroutine),
  os = { time = os.time, clock = os.clock, date = os.date, difftime = os.difftime },
}
-- job_submit/lua's own helpers on job records, when slurmctld defines them.
for _, name in ipairs({"_get_job_env_field_name", "_get_job_req_field_name", "_set_job_env_field",
    "_set_job_req_field", "_get_part_rec_field"}) do
  sandbox[name] = rawget(_G, name)
end
sandbox._G = sandbox
local script = assert(loadstring(`

const jobSubmitSandboxEnd = `, "=jobSubmitLua"))
setfenv(script, sandbox)
local loaded = script()
slurm_job_submit = rawget(sandbox, "slurm_job_submit")
slurm_job_modify = rawget(sandbox, "slurm_job_modify")
return loaded
`

// JobSubmitLua is the job_submit.lua slurmctld loads for a spec.jobSubmitLua of src: src run
// in the sandbox of jobSubmitSandbox, its line numbers its own (errors say "jobSubmitLua:N:").
func JobSubmitLua(src string) string {
	// A long bracket whose closing form src does not contain; the newline after the opening
	// bracket is skipped by Lua, so src starts on the string's first line, and the one before
	// the closing bracket keeps src's last characters from forming it.
	level := 0
	for strings.Contains(src, "]"+strings.Repeat("=", level)+"]") {
		level++
	}
	eq := strings.Repeat("=", level)
	return jobSubmitSandbox + "[" + eq + "[\n" + src + "\n]" + eq + "]" + jobSubmitSandboxEnd
}
