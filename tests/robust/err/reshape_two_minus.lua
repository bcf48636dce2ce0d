local x = kiln.input("x", {4})
kiln.output("y", x:reshape(-1, -1))
-- expect: tests/robust/err/reshape_two_minus.lua:2: error: reshape: only one shape entry may be -1
