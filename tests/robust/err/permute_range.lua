local x = kiln.input("x", {2, 3})
kiln.output("y", x:permute(0, 5))
-- expect: tests/robust/err/permute_range.lua:2: error: permute: dim 5 out of range for a rank-2 tensor (expected -2..1)
