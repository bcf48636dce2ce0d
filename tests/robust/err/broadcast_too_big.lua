local a = kiln.input("a", {65536, 1})
local b = kiln.input("b", {1, 65536})
kiln.output("y", a + b)
