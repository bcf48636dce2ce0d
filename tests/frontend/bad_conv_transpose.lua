-- conv_transpose2d with output_padding not below stride or dilation: one line naming the line
-- expect: tests/frontend/bad_conv_transpose.lua:5: error: conv_transpose2d: padding [0, 0, -2, -2] (bottom/right less output_padding) out of range for stride [2, 2], dilation [1, 1]: output_padding must be smaller than stride or dilation
local kiln = require "kiln"
local x = kiln.input("x", {1, 2, 4, 4})
kiln.output("y", kiln.conv_transpose2d(x, kiln.param("w", {2, 3, 3, 3}), {stride = 2, output_padding = 2}))
