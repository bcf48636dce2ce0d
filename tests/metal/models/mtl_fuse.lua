-- mtl_fuse.lua — Metal test model for fused kernels: every anchor family followed by
-- an elementwise chain whose extra operands broadcast in every way a chain reads
-- them (same shape, a trailing bias, per row, per channel, a run-time scalar, general
-- strides), comparisons and casts inside a chain, a chain cut where its dtype
-- changes, the float4 path with a chain, and values that must not fuse (two uses,
-- outputs, views). Emulated against the C target, which t_passes also checks against
-- the interpreter and against a --no-fuse build.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(5)
local a = kiln.input("a", {2, 3, 9, 11})
local v = kiln.input("v", {5, 24})
local s = kiln.input("s", {1})
local col = kiln.input("col", {5, 1})
local odd = kiln.input("odd", {2, 1, 9, 1})
local ids = kiln.input("ids", {7}, "i32")

-- tiled matmul + bias + per-row scale - run-time scalar, then exact GELU
local w = kiln.param("w", {24, 40})
kiln.output("mm", kiln.gelu(kiln.matmul(v, w) + kiln.param("b", {40}) * col - s))
-- a row vector times a Linear weight (matvec) + bias, then tanh GELU and a clamp
local lin = nn.name(nn.Linear(24, 13), "lin")
kiln.output("lin", kiln.min(kiln.gelu(lin(kiln.slice(v, 0, 2, 3)), "tanh"), 0.25))
-- conv (with bias) + relu + per-channel scale + general broadcast
local conv = nn.name(nn.Conv2d(3, 4, 3, {padding = 1}), "conv")
local ch = kiln.param("ch", {4, 1, 1})
local c = kiln.relu(conv(a)) * ch + odd
-- batchnorm + relu + residual add + relu (c has two uses: it stays a kernel result)
local bn = nn.name(nn.BatchNorm2d(4), "bn")
local r = kiln.relu(kiln.relu(bn(c)) + c)
kiln.output("res", r)
-- pools + a chain
kiln.output("maxp", kiln.sigmoid(kiln.maxpool2d(a, {kernel = 3, stride = 2, padding = 1}) + s))
kiln.output("avgp", kiln.abs(kiln.avgpool2d(a, {kernel = 2, stride = 2}) - 0.1))
-- reductions: few (thread) and many (threadgroup) elements reduced
kiln.output("red", kiln.sqrt(kiln.abs(kiln.sum(a, {2, 3})) + 1) * kiln.param("rs", {3}))
kiln.output("red2", kiln.exp(kiln.amax(a, 3, true)) - odd)
-- softmax * a general-broadcast mask, then where(gt) inside the chain
local sm = kiln.softmax(a, 3) * odd
kiln.output("sm", kiln.where(kiln.gt(sm, 0.05), sm, kiln.neg(s)))
-- layernorm, then silu by hand (t * sigmoid(t): t has two uses)
local ln = kiln.layernorm(a, nil, nil, {dims = 2})
kiln.output("silu", ln * kiln.sigmoid(ln))
-- rmsnorm + a cast round trip in the chain (result f32 again: fused)
local rn = kiln.rmsnorm(v, kiln.param("g", {24}))
kiln.output("rq", kiln.cast(kiln.cast(rn * 8, "i32"), "f32") / 8 + col)
-- a chain ending in bool is cut before the comparison
kiln.output("mask", kiln.lt(kiln.exp(v), 2))
-- data movement anchors
kiln.output("tr", kiln.transpose(a, 1, 3) * 3 + 1)
kiln.output("sl", kiln.neg(kiln.slice(a, 3, 1, 10, 2)) + odd)
kiln.output("ga", kiln.tanh(kiln.gather(v, ids, 1)) * col)
kiln.output("cat", kiln.relu(kiln.concat({a, kiln.exp(a)}, 1)) - s)
-- float4 elementwise path with a chain; a value that is an output and read again
local e = kiln.exp(kiln.slice(v, 0, 0, 4)) * 0.5
kiln.output("e", e)
kiln.output("e2", kiln.tanh(e) + e)
-- batched matmuls (y transposed or not) and a reduction over a middle dim, each + a chain
kiln.output("bmm", kiln.relu(kiln.matmul(a, a, {trans_b = true}) - odd))
kiln.output("bmm2", kiln.matmul(a, kiln.param("w2", {11, 6})) * kiln.param("w3", {6}) + s)
kiln.output("mid", kiln.mean(a, 1) * 2 - kiln.param("m", {9, 1}))
kiln.output("ln2", kiln.relu(kiln.layernorm(v, kiln.param("lg", {24}), kiln.param("lb", {24}))))
