local x = kiln.input("x", {0, 3})
-- expect: tests/robust/err/dim_zero.lua:1: error: kiln.input: shape has a dim 0 < 1 (Kiln has no empty tensors)
