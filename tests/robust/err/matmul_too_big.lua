local a = kiln.input("a", {50000, 1})
local b = kiln.input("b", {1, 50000})
kiln.output("y", a:matmul(b))
-- expect: tests/robust/err/matmul_too_big.lua:3: error: matmul: the result [50000, 50000] has more than 2147483647 elements, Kiln's limit per tensor
