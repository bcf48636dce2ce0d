-- expect: tests/frontend/bad_write_ring.lua:5: error: kiln.write: ring offset -1 must be in [0, 2^31)
local kiln = require "kiln"
local s = kiln.state("s", {4, 2})
local x = kiln.input("x", {3, 2})
kiln.write(s, x, {at = -1, ring = true})
kiln.output("y", s * 1)
