-- composites.lua — the PyTorch functions Kiln writes as compositions of its ops
-- (gen/frontend/ops.lua), built for every target: t_metal and t_coreml compare the Metal
-- emulator and the Core ML checker with the C target, t_compile and t_determinism build it.
local kiln = require "kiln"

local x = kiln.input("x", {4, 6})
kiln.output("act", kiln.hardswish(x) + kiln.hardsigmoid(x) + kiln.relu6(x * 3) + kiln.leaky_relu(x, 0.1)
                   + kiln.elu(x) + kiln.mish(x) + kiln.softplus(x) + kiln.sign(x) + x:clamp(-0.5, 0.5))
kiln.output("lsm", x:log_softmax(-1))
kiln.output("lse", x:logsumexp(0))
kiln.output("var", x:var(1) + x:std(0):sum() + x:amin(1))
kiln.output("cum", x:cumsum(1))
kiln.output("shape", x:tril(1):flip({0}) + x:triu():tile({1, 1}))
local a, b = x:split({2, 4}, 1)
kiln.output("parts", a:select(1, -1) + b:sum(1))
-- the unary ops that are kernels of their own (sin, cos, erf, floor, ceil, round)
kiln.output("unary", kiln.sin(x) * kiln.cos(x) + kiln.erf(x) + (x * 3):floor() + (x * 3):ceil() + (x * 2.5):round())
