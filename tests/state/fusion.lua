-- fusion.lua — a kernel that fusion must not form: exp(old) reads the state as the call
-- found it (so it runs before the write), and the add after it needs t, which reads the
-- state after the write. Fused into one kernel, the two could not both be honoured;
-- pass_group keeps the add out (chain_keeps_state_order), and the schedule puts exp
-- before the write and the add after it.
local kiln = require "kiln"
local s = kiln.state("s", {4})

kiln.entry("f", function()
  local x = kiln.input("x", {2})
  local pos = kiln.input("pos", {}, "i32")
  local e = kiln.exp(s:reshape(2, 2))         -- the state before the write
  kiln.write(s, x, {at = pos})
  local t = s:reshape(2, 2) * 2               -- after it
  kiln.output("y", e + t)
end)
