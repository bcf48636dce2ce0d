local x = kiln.input("x", {5, 3})
local i = kiln.constant({0, 7, 2}, {3}, "i32")
kiln.output("y", kiln.gather(x, i, 0))
