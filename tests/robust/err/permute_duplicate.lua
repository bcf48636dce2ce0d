local x = kiln.input("x", {2, 3})
kiln.output("y", x:permute({1, 1}))
-- expect: tests/robust/err/permute_duplicate.lua:2: error: permute: dim 1 appears twice
