local x = kiln.input("x", {2, 3})
kiln.output("y", x:sum({1, -1}))
-- expect: tests/robust/err/sum_duplicate_axes.lua:2: error: sum: dim 1 appears twice
