-- an i64 state: i64 is for kiln.input only (it is cast to i32 at once)
-- expect: tests/frontend/bad_state_i64.lua:4: error: kiln.state: dtype i64 is for kiln.input only (it is cast to i32 at once); use "i32"
local kiln = require "kiln"
local s = kiln.state("hist", {4}, "i64")
kiln.entry("step", function() kiln.output("y", s + 1) end)
