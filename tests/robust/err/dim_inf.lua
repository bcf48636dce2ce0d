local x = kiln.input("x", {1 / 0})
-- expect: tests/robust/err/dim_inf.lua:1: error: kiln.input: shape entry 1 must be an integer, got inf
