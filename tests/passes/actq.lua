-- actq.lua — pass_actq (--activations ggml, actq.args): the Q8_0 rounding in front of two
-- products that share their activations (made once), the Q8_K rounding in front of a q4_k
-- product, a W x product rounded along x's rows (transposed there and back), and an f32
-- product left alone; ids renumbered so each rounding sits before its first product.
local kiln = require "kiln"
kiln.seed(3)
local x = kiln.input("x", {2, 64})
local w = kiln.param("w", {40, 64}, {"normal", 0, 1})
local u = kiln.param("u", {8, 64}, {"normal", 0, 1})
local v = kiln.param("v", {8, 256}, {"normal", 0, 1})
local f = kiln.param("f", {8, 64}, {"normal", 0, 1})
kiln.output("y", kiln.linear(x, w))
kiln.output("z", kiln.linear(x, u))
kiln.output("t", kiln.linear(kiln.input("x2", {1, 256}), v))
kiln.output("c", kiln.matmul(w, kiln.input("col", {64, 1})))
kiln.output("g", kiln.linear(x, f))
