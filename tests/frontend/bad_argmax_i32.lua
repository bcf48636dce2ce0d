-- argmax of an i32 tensor (f32 only): one line naming the line, the dtype and shape
-- expect: tests/frontend/bad_argmax_i32.lua:5: error: argmax: operands must be f32, input 0 is i32[4, 40]
local kiln = require "kiln"
local x = kiln.input("x", {4, 40}, "i32")
kiln.output("v", kiln.argmax(x, 1))
