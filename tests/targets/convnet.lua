-- convnet.lua — convolutions alone, on every target: t_metal and t_coreml compare the
-- Metal emulator and the Core ML checker with the C target, t_compile and t_determinism
-- build it. No matmul (the C file carries the micro-kernels without kiln_gemm), a batchnorm
-- fused into each kind of conv kernel (matrix product, gathered patch, direct), a
-- depthwise conv at stride 2, a strided and dilated direct conv, a residual add.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(13)

local x = kiln.input("x", {2, 8, 12, 11})
local function bn(c) return nn.BatchNorm2d(c) end
local stem = nn.name(nn.Sequential {nn.Conv2d(8, 16, 3, {padding = 1, bias = false}), bn(16), nn.ReLU()}, "stem")
local dw = nn.name(nn.Sequential {nn.Conv2d(16, 16, 3, {stride = 2, padding = 1, groups = 16}), bn(16), nn.ReLU()}, "dw")
local patch = nn.name(nn.Sequential {nn.Conv2d(16, 5, 3, {padding = 1}), bn(5)}, "patch")
local direct = nn.name(nn.Sequential {nn.Conv2d(5, 3, 3, {stride = {1, 2}, dilation = 2, padding = 2}), bn(3)}, "direct")
local proj = nn.name(nn.Conv2d(16, 16, 1, {stride = 2, bias = false}), "proj")
local y = stem(x)
local z = dw(y)
kiln.output("feat", kiln.relu(z + proj(y)))
kiln.output("head", direct(patch(z)))
