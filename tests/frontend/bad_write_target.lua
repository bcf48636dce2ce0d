-- expect: tests/frontend/bad_write_target.lua:4: error: kiln.write: argument 1 must be a state (from kiln.state), got a tensor
local kiln = require "kiln"
local x = kiln.input("x", {2})
kiln.write(x, x, {at = 0})
kiln.output("y", x)
