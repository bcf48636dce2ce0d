local x = kiln.input("x", {4})
kiln.output("y", x:slice(0, 0, 4, 0))
-- expect: tests/robust/err/slice_step_zero.lua:2: error: slice: step 0 must be positive
