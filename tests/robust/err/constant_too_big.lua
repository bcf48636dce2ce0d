local c = kiln.constant(1, {100000, 100000})
-- expect: tests/robust/err/constant_too_big.lua:1: error: kiln.constant: shape [100000, 100000] has more than 2147483647 elements, Kiln's limit per tensor
