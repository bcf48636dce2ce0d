local x = kiln.input("x", {0 / 0})
-- expect: tests/robust/err/dim_nan.lua:1: error: kiln.input: shape entry 1 must be an integer, got nan
