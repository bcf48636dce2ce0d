-- expect: tests/frontend/bad_write_dtype.lua:5: error: kiln.write: value is f32, state tokens is i32
local kiln = require "kiln"
local t = kiln.state("tokens", {8}, "i32")
local x = kiln.input("x", {2})
kiln.write(t, x, {at = 0})
kiln.output("y", x)
