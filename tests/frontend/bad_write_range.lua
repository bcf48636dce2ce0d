-- expect: tests/frontend/bad_write_range.lua:5: error: kiln.write: offset 7 puts 2 rows outside [0, 8) along axis 0 of state s [8]
local kiln = require "kiln"
local s = kiln.state("s", {8})
local x = kiln.input("x", {2})
kiln.write(s, x, {at = 7})
kiln.output("y", s * 1)
