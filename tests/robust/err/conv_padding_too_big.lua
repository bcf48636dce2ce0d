local x = kiln.input("x", {1, 1, 4, 4})
local w = kiln.param("w", {1, 1, 1, 1})
kiln.output("y", kiln.conv2d(x, w, {padding = 1048576}))
-- expect: tests/robust/err/conv_padding_too_big.lua:3: error: conv2d: the result [1, 1, 2097156, 2097156] has more than 2147483647 elements, Kiln's limit per tensor
