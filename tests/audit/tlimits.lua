-- tlimits.lua — audit family "target limits" of issue 12: a concat and a stack of more
-- inputs than a Metal kernel can bind, values of rank 6 (Core ML's ops stop at rank 5),
-- a dilated conv whose weight went through a reshape.
local kiln = require "kiln"
kiln.seed(9)

local x = kiln.input("x", {2, 3})
local parts = {}
for k = 1, 40 do parts[k] = x * k end
kiln.output("concat_40", kiln.concat(parts, 1))
kiln.output("stack_33", kiln.stack({table.unpack(parts, 1, 33)}, 1))
local z = kiln.input("z", {2, 6, 2, 2})
local r6 = (z:reshape(2, 1, 2, 3, 2, 2) * 2 + 1):exp() * z:slice(0, 0, 1):reshape(1, 2, 3, 2, 2)   -- broadcast
kiln.output("rank6", r6:reshape(2, 6, 2, 2) - z)
local s = kiln.input("s", {1, 4, 12})
local w = kiln.param("w", {6, 12}):reshape(6, 4, 3)
kiln.output("dilated_conv_reshaped_w", kiln.conv1d(s, w, nil, {dilation = 3, padding = 3}))
local w2 = kiln.param("w2", {3, 4 * 9}):reshape(3, 4, 3, 3)
kiln.output("dilated_conv2d_reshaped_w", kiln.conv2d(kiln.input("q", {1, 4, 7, 7}), w2, nil, {dilation = 2, padding = 2}))
