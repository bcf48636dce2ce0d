-- qbatch.lua — matrix weights read by row with batch dimensions: a Linear over [3, 1, K]
-- (one row a matrix), over [2, 5, K], and W x over a batch of [K, 2] matrices (W
-- broadcast, 36 rows: a partial panel). Built as it is (f32) with every model, and by
-- t_metal with --quantize q4_k, where the Metal kernels read W and V from q4_k panels
-- (docs/quantization.md) on the grid's batch dimension.
local kiln = require "kiln"
kiln.seed(3)

local K = 256
local w = kiln.param("w", {40, K}, {"normal", 0, 1})
local v = kiln.param("v", {36, K}, {"normal", 0, 1})
kiln.output("a", kiln.linear(kiln.input("xa", {3, 1, K}), w))
kiln.output("b", kiln.linear(kiln.input("xb", {2, 5, K}), w))
kiln.output("c", kiln.matmul(v, kiln.input("xc", {2, K, 2})))
