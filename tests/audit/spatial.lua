-- spatial.lua — audit family "spatial": padding, 1-D and transposed convolutions,
-- resampling, adaptive pooling and the group/instance norms of issue 12, functional and
-- as nn modules (tests/py/run_audit.py compares each target with PyTorch, which it feeds
-- the weights of Kiln's own build).
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(12)

local x = kiln.input("x", {1, 4, 5, 6})
local s = kiln.input("s", {2, 4, 9})
kiln.output("pad_constant", kiln.pad(x, {1, 2, 2, 1}, "constant", 0.5))
kiln.output("pad_reflect", kiln.pad(x, {2, 1, 1, 3}, "reflect"))
kiln.output("pad_replicate", kiln.pad(s, {3, 2}, "replicate"))
local w1 = kiln.param("w1", {6, 2, 3})
kiln.output("conv1d", kiln.conv1d(s, w1, nil, {stride = 2, padding = 1, dilation = 2, groups = 2}))
local wt1 = kiln.param("wt1", {4, 3, 3})
kiln.output("conv_transpose1d", kiln.conv_transpose1d(s, wt1, nil, {stride = 2, padding = 1, output_padding = 1}))
local wt2 = kiln.param("wt2", {4, 2, 3, 2})
local bt2 = kiln.param("bt2", {4})
kiln.output("conv_transpose2d", kiln.conv_transpose2d(x, wt2, bt2, {stride = {2, 1}, padding = {1, 0}, groups = 2}))
kiln.output("interp_nearest", kiln.interpolate(x, {size = {7, 9}, mode = "nearest"}))
kiln.output("interp_bilinear", kiln.interpolate(x, {scale_factor = 2, mode = "bilinear"}))
kiln.output("interp_bilinear_ac", kiln.interpolate(x, {size = {8, 4}, mode = "bilinear", align_corners = true}))
kiln.output("adaptive_avg_pool2d", kiln.adaptive_avg_pool2d(x, {3, 4}))
local gw, gb = kiln.param("gw", {4}), kiln.param("gb", {4})
kiln.output("group_norm", kiln.group_norm(x, 2, gw, gb))
kiln.output("instance_norm", kiln.group_norm(x, 4))
kiln.output("nn_Conv1d", nn.name(nn.Conv1d(4, 5, 3, {padding = 1}), "c1")(s))
kiln.output("nn_ConvTranspose2d", nn.name(nn.ConvTranspose2d(4, 3, 3, {stride = 2, padding = 1, output_padding = 1}), "ct")(x))
kiln.output("nn_Upsample", nn.Upsample({scale_factor = 2, mode = "bilinear", align_corners = true})(x))
kiln.output("nn_GroupNorm", nn.name(nn.GroupNorm(2, 4), "gn")(x))
kiln.output("nn_BatchNorm1d", nn.name(nn.BatchNorm1d(4), "bn")(s))
