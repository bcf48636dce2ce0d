local a = kiln.input("a", {65536, 1})
local b = kiln.input("b", {1, 65536})
kiln.output("y", a + b)
-- expect: tests/robust/err/broadcast_too_big.lua:3: error: add: the result [65536, 65536] has more than 2147483647 elements, Kiln's limit per tensor
