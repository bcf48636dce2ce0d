-- structure.lua — Core ML op coverage: data movement, reductions, norms, pools,
-- gather/embedding, matmul of two activations and of a non-transposed constant,
-- batchnorm on rank 2 (composed in MIL), rmsnorm, layernorm over two dims.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(9)

local x = kiln.input("x", {2, 4, 6, 6})
local ids = kiln.input("ids", {2, 5}, "i32")

local emb = nn.name(nn.Embedding(7, 6), "tok")(ids)                               -- gather, [2, 5, 6]
local t = kiln.permute(emb, {0, 2, 1})                            -- transpose, [2, 6, 5]
local a = kiln.matmul(emb, t)                                     -- activations x activations
local w = kiln.param("w", {6, 3})
local b = kiln.matmul(emb, w)                                     -- const y, not transposed
local cat = kiln.concat({b, kiln.slice(emb, 2, 1, 4)}, 2)         -- [2, 5, 6]
local s = kiln.softmax(a, -1) + kiln.sum(cat, 2, true) + kiln.mean(cat, {1, 2}, true) + kiln.amax(kiln.slice(cat, 2, 0, 5), 1, true)

local mp = kiln.maxpool2d(x, {kernel = 3, stride = 2, padding = 1})
local ap = kiln.avgpool2d(x, {kernel = 3, stride = 2, padding = 1, count_include_pad = false})
local ap2 = kiln.avgpool2d(x, {kernel = 3, stride = 1, padding = 1})
local pooled = kiln.flatten(mp) + kiln.flatten(ap) + kiln.flatten(kiln.slice(kiln.slice(ap2, 2, 0, 6, 2), 3, 1, 6, 2))  -- [2, 36]
local bn = kiln.batchnorm(pooled, kiln.param("m", {36}), kiln.param("v", {36}, {"uniform", 0.5, 2}),
                          kiln.param("g", {36}), kiln.param("bb", {36}))
local rms = nn.name(nn.RMSNorm(36), "rms")(bn)
local ln = kiln.layernorm(kiln.reshape(rms, {2, 6, 6}), kiln.param("lg", {6, 6}), kiln.param("lb", {6, 6}), {dims = 2})
kiln.output("seq", s)
kiln.output("img", ln)

-- a dilated grouped convolution with a computed (non-constant) bias: conv + add in MIL;
-- batchnorm with a computed variance and layernorm with a computed gamma: compositions.
local cb = kiln.sigmoid(kiln.param("cb", {4}))
local cv = kiln.conv2d(x, kiln.param("cw", {4, 2, 3, 3}), cb, {padding = 2, dilation = 2, groups = 2})
local bn4 = kiln.batchnorm(cv, kiln.param("m4", {4}), kiln.exp(kiln.param("v4", {4})), kiln.param("g4", {4}),
                           kiln.param("b4", {4}))
kiln.output("conv", kiln.layernorm(bn4, kiln.exp(kiln.param("lg2", {6})), kiln.param("lb2", {6})))
kiln.output("same", x)   -- an output that is an input: a copy (MIL identity)
