local x = kiln.input("x", {"2"})
-- expect: tests/robust/err/dim_string.lua:1: error: kiln.input: shape entry 1 must be an integer, got string
