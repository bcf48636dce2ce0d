-- expect: tests/frontend/bad_write_offset.lua:6: error: kiln.write: at must be an input of the entry or an integer (generated code checks it before running anything; a computed offset is not supported yet)
local kiln = require "kiln"
local s = kiln.state("s", {8})
local x = kiln.input("x", {2})
local p = kiln.input("p", {})
kiln.write(s, x, {at = kiln.cast(p, "i32")})
kiln.output("y", s * 1)
