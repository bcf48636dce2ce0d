local x = kiln.input("x", {1, 1, 4, 4})
local w = kiln.param("w", {1, 1, 1, 1})
kiln.output("y", kiln.conv2d(x, w, {stride = 1e10}))
-- expect: tests/robust/err/conv_stride_huge.lua:3: error: conv2d: stride value 10000000000 is out of range
