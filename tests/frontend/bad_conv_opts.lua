-- expect: tests/frontend/bad_conv_opts.lua:5: error: conv2d: unknown option 'strides' (known: stride, padding, dilation, groups)
local kiln = require "kiln"
local x = kiln.input("x", {1, 3, 8, 8})
local w = kiln.param("w", {4, 3, 3, 3})
kiln.output("y", kiln.conv2d(x, w, {strides = 2}))
