local x = kiln.input("x", {1, 1, 1, 1, 1, 1, 1, 1, 1})
-- expect: tests/robust/err/rank_too_big.lua:1: error: kiln.input: shape has rank 9; Kiln allows at most 8
