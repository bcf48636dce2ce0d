-- composites_nn.lua — the resampling, padding, indexing and normalisation compositions of
-- gen/frontend/ops.lua and their kiln.nn modules, built for every target (t_metal, t_coreml
-- compare with the C target; t_compile, t_determinism build it).
local kiln = require "kiln"
local nn = require "kiln.nn"

local x = kiln.input("x", {1, 4, 6, 6})
kiln.output("up", nn.Upsample({scale_factor = 2, mode = "bilinear"})(x) + nn.Upsample({scale_factor = 2})(x))
kiln.output("pool", nn.AdaptiveAvgPool2d({3, 4})(x))
kiln.output("gn", nn.name(nn.GroupNorm(2, 4), "gn")(x))
kiln.output("pad", kiln.pad(x, {1, 2, 2, 1}, "reflect") + kiln.pad(x, {1, 2, 2, 1}, "replicate")
                   + kiln.pad(x, {1, 2, 2, 1}))
local s = kiln.input("s", {2, 4, 8})
kiln.output("conv", nn.name(nn.Conv1d(4, 6, 3, {padding = 1}), "c1")(s))
kiln.output("bn", nn.name(nn.BatchNorm1d(4), "bn")(s))
kiln.output("take", kiln.take_along_dim(s, kiln.input("i", {2, 4, 3}, "i32"), 2))
kiln.output("seq", nn.name(nn.Sequential{kiln.relu, nn.Linear(8, 3)}, "seq")(s):expand({2, 2, 4, 3}))
