-- expect: tests/frontend/bad_write_shape.lua:7: error: kiln.write: value [4, 1, 3] does not fit state layers.0.k [4, 16, 8] along axis 1 (the other dims must equal the state's)
local kiln = require "kiln"
local k = kiln.state("layers.0.k", {4, 16, 8})
kiln.entry("decode", function()
  local new = kiln.input("new", {4, 1, 3})
  local pos = kiln.input("pos", {}, "i32")
  kiln.write(k, new, {axis = 1, at = pos})
end)
