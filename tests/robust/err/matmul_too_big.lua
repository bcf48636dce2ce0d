local a = kiln.input("a", {50000, 1})
local b = kiln.input("b", {1, 50000})
kiln.output("y", a:matmul(b))
