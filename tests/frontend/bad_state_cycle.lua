-- expect: tests/frontend/bad_state_cycle.lua:8: error: add reads state s as it was before the kiln.write at tests/frontend/bad_state_cycle.lua:7, but also needs that write's result; keep a copy of the old value made before the write (e.g. local old = state * 1)
local kiln = require "kiln"
local s = kiln.state("s", {4})
kiln.entry("step", function()
  local x = kiln.input("x", {2})
  local old = s:reshape(4)
  kiln.write(s, x, {at = 0})
  kiln.output("y", old + s)
end)
