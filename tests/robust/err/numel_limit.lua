local x = kiln.input("x", {65536, 65536})
-- expect: tests/robust/err/numel_limit.lua:1: error: kiln.input: shape [65536, 65536] has more than 2147483647 elements, Kiln's limit per tensor
