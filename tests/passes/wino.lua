-- A 3x3 convolution that Winograd's F(2x2, 3x3) serves (16 channels in and out, 8x8
-- output): pass_pack stores its filters transformed (winograd12^T) and pass_memplan gives
-- the kernel scratch for its input tiles' transforms; the 2x2 one beside it stays packed
-- (panels12^T). wino_direct.lua is the same model built with --no-winograd.
local kiln = require "kiln"
kiln.seed(1)
local x = kiln.input("img", {1, 16, 8, 8})
local w3 = kiln.param("w3", {16, 16, 3, 3}, {"normal", 0, 0.1})
local w2 = kiln.param("w2", {12, 16, 2, 2}, {"normal", 0, 0.1})
kiln.output("y", kiln.relu(kiln.conv2d(x, w3, {padding = 1})))
kiln.output("z", kiln.conv2d(x, w2))
