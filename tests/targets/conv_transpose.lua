-- conv_transpose.lua — transposed convolutions on every target: t_metal and t_coreml
-- compare the Metal emulator and the Core ML checker with the C target, t_compile and
-- t_determinism build it. output_padding (Core ML: a MIL pad after the conv_transpose,
-- then the bias), groups, dilation, a 4-value padding, no bias, conv_transpose1d and the
-- nn modules.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(11)

local x = kiln.input("x", {2, 4, 5, 5})
local s = kiln.input("s", {1, 3, 7})
local up = nn.name(nn.ConvTranspose2d(4, 6, 3, {stride = 2, padding = 1, output_padding = 1, groups = 2}), "up")
kiln.output("up", up(x))
kiln.output("dil", kiln.conv_transpose2d(x, kiln.param("wd", {4, 2, 3, 2}), {dilation = {2, 1}, padding = {1, 0, 2, 1}}))
kiln.output("plain", kiln.conv_transpose2d(x, kiln.param("wp", {4, 3, 2, 2}), kiln.param("bp", {3}), {stride = 2}))
kiln.output("one_d", nn.name(nn.ConvTranspose1d(3, 2, 4, {stride = 3, padding = 1, output_padding = 2}), "t1")(s))
