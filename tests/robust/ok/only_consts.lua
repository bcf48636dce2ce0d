-- No inputs, everything folds: the run function still fills every output.
local a = kiln.constant({{1, 2}, {3, 4}})
local b = kiln.constant(0.5)
kiln.output("f", (a * b):exp():sum(1))
kiln.output("i", kiln.constant({7, -8, 9}, {3}, "i32"))
kiln.output("flags", kiln.constant({true, false, true}, {3}, "bool"))
kiln.output("s", kiln.constant(3.25))
kiln.output("cmp", a:gt(2))
