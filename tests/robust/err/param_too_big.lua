local w = kiln.param("w", {1048576, 1048576})
-- expect: tests/robust/err/param_too_big.lua:1: error: kiln.param: shape [1048576, 1048576] has more than 2147483647 elements, Kiln's limit per tensor
