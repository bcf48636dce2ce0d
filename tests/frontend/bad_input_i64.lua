-- an i64 input (not supported yet): one line saying what to do instead
-- expect: tests/frontend/bad_input_i64.lua:4: error: kiln.input: dtype i64 is not supported yet: declare it "i32" and narrow the ids on the host (each must lie in [-2^31, 2^31))
local kiln = require "kiln"
local ids = kiln.input("ids", {4}, "i64")
kiln.output("y", ids)
