local x = kiln.input("x", {2.5})
-- expect: tests/robust/err/dim_fraction.lua:1: error: kiln.input: shape entry 1 must be an integer, got 2.5
