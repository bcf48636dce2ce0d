local w = kiln.param("w", {4, -3})
-- expect: tests/robust/err/dim_negative.lua:1: error: kiln.param: shape has a dim -3 < 1 (Kiln has no empty tensors)
