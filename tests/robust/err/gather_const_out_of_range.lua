local x = kiln.input("x", {5, 3})
local i = kiln.constant({0, 7, 2}, {3}, "i32")
kiln.output("y", kiln.gather(x, i, 0))
-- expect: tests/robust/err/gather_const_out_of_range.lua:3: error: gather: constant index 7 (entry 1) is out of range for dim 0 of [5, 3] (0..4)
