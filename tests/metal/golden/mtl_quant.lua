-- mtl_quant.lua — the golden Metal model of weights kept in stored formats: built with
-- the --quantize rules of mtl_quant.args (q4_0, q6_k, g8), its .metal and dispatch table
-- are kept in tests/metal/golden/expected/ and compared byte for byte by tests/t_metal.sh
-- (its kernels run on the emulator as tests/quant/qmix.lua's do).
local kiln = require "kiln"
kiln.seed(2)
local K = 256
local w = kiln.param("w", {40, K}, {"normal", 0, 1})
local v = kiln.param("v", {36, K}, {"normal", 0, 1})
local e = kiln.param("e", {10, K}, {"normal", 0, 1})
kiln.output("y1", kiln.linear(kiln.input("x1", {1, K}), w))
kiln.output("y4", kiln.linear(kiln.input("x4", {4, K}), w))
kiln.output("vx", kiln.matmul(v, kiln.input("col", {K, 1})))
kiln.output("rows", kiln.embedding(e, kiln.input("ids", {3}, "i32")))
