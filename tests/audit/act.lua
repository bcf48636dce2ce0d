-- act.lua — audit family "elementwise": the activations and unary functions of issue 12,
-- one output per item (tests/py/run_audit.py compares each target with PyTorch).
local kiln = require "kiln"
local nn = require "kiln.nn"

local x = kiln.input("x", {3, 8})       -- uniform in [-1, 1) from the Metal harness
local w = x * 4                           -- past the bends of relu6, hardtanh, hardswish
kiln.output("clamp", w:clamp(-0.5, 2))
kiln.output("clip", kiln.clip(w, nil, 1.5))
kiln.output("relu6", kiln.relu6(w * 2))
kiln.output("hardtanh", kiln.hardtanh(w, -2, 2.5))
kiln.output("hardswish", kiln.hardswish(w))
kiln.output("hardsigmoid", kiln.hardsigmoid(w))
kiln.output("leaky_relu", kiln.leaky_relu(w, 0.2))
kiln.output("elu", kiln.elu(w, 0.7))
kiln.output("softplus", kiln.softplus(w * 6, 1.5, 10))
kiln.output("mish", kiln.mish(w))
kiln.output("erf", kiln.erf(w))
kiln.output("sin", kiln.sin(w))
kiln.output("cos", kiln.cos(w))
kiln.output("floor", w:floor())
kiln.output("ceil", w:ceil())
kiln.output("round", w:round())
kiln.output("sign", kiln.sign(x))
kiln.output("reciprocal", kiln.reciprocal(x + 1.5))
kiln.output("log_softmax", w:log_softmax(-1))
kiln.output("logsumexp", w:logsumexp(1, true))
kiln.output("nn_ReLU6", nn.ReLU6()(w * 2))
kiln.output("nn_Hardtanh", nn.Hardtanh(-1.5, 0.5)(w))
kiln.output("nn_LeakyReLU", nn.LeakyReLU(0.3)(w))
kiln.output("nn_GELU_tanh", nn.GELU({approximate = "tanh"})(w))
