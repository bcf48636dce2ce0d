-- mtl_tiny.lua — the golden Metal model: its .metal and dispatch table are kept in
-- tests/metal/golden/expected/ and compared byte for byte by tests/t_metal.sh.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(1)
local x = kiln.input("x", {3, 20})
local fc = nn.name(nn.Linear(20, 12), "fc")
local h = kiln.gelu(fc(x))
kiln.output("probs", kiln.softmax(kiln.matmul(h, h, {trans_b = true}), 1))
