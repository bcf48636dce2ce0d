local x = kiln.input("x", {1099511627776, 1099511627776})
-- expect: tests/robust/err/numel_overflow.lua:1: error: kiln.input: shape [1099511627776, 1099511627776] has more than 2147483647 elements, Kiln's limit per tensor
