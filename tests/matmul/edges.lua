-- edges.lua — matmuls on the edges of the C micro-kernel's tiling (templates/c/gemm_lib.c.tmpl):
-- K of one pass (300) and past a deep pass of 2 KILN_KC (1100, 13 rows: passes of 1024 and 76
-- over a packed weight, the row left over copied 512 values of k at a time), N not a multiple of a 32-column
-- panel, row counts around every tile height (AVX-512 12, AVX2 3, NEON 2, plain 4) and below
-- half a tile (28 rows: 12 + 8 + 8 on AVX-512, 12 + 12 + 4 elsewhere), weights packed at
-- build time (transposed and not) and activations read in place, the transposed
-- matrix-vector product, a batch folded into rows, a fused epilogue; a weight too narrow to
-- pack (N = 10) and a transposed activation, copied a block at a time beside rows read in place;
-- an operand every matrix of a batched product shares (an attention mask over heads, and over
-- a batch folded into rows), read along the output's row (row % 20 * 24 + j), not gathered;
-- attention over a prefill's 37 query rows (templates/c/attn_lib.c.tmpl: blocks of 32
-- queries, keys in chunks of 48 past the first, a head size of 5 left over from every tile),
-- and over a window of a ring whose slots wrap inside a block's keys.
-- tests/t_isa.sh compiles it on every instruction-set path and compares the bits; t_ops'
-- gemm_* cases check the same shapes against PyTorch.
local kiln = require "kiln"
kiln.seed(7)

local w = kiln.param("w", {70, 300}, {"normal", 0, 1})          -- Linear weight [N, K]: packed from its transpose
local u = kiln.param("u", {300, 45}, {"normal", 0, 1})          -- [K, N]: packed as is
local v = kiln.param("v", {40, 300}, {"normal", 0, 1})          -- W of W x: the transposed product
local b = kiln.param("b", {70}, {"normal", 0, 1})
local wd = kiln.param("wd", {40, 1100}, {"normal", 0, 1})      -- K = 1100: deep passes
local wn = kiln.param("wn", {10, 300}, {"normal", 0, 1})       -- N = 10: not packed (copied)

local x13 = kiln.input("x13", {13, 300})
local x13d = kiln.input("x13d", {13, 1100})
local x28 = kiln.input("x28", {28, 300})
local x5 = kiln.input("x5", {5, 300})
local x1 = kiln.input("x1", {1, 300})
local xb = kiln.input("xb", {2, 6, 300})
local col = kiln.input("col", {300, 1})
local a = kiln.input("a", {7, 33})
local c = kiln.input("c", {33, 45})
local ct = kiln.input("ct", {45, 33})
local a28 = kiln.input("a28", {28, 33})
local qh = kiln.input("qh", {2, 3, 20, 16})
local kh = kiln.input("kh", {2, 1, 24, 16})
local mask = kiln.input("mask", {20, 24})
local xr = kiln.input("xr", {3, 20, 16})
local wr = kiln.input("wr", {16, 24})

kiln.output("lin13", kiln.relu(kiln.linear(x13, w, b)))
kiln.output("lin13d", kiln.relu(kiln.linear(x13d, wd)))
kiln.output("lin28", kiln.relu(kiln.linear(x28, w, b)))
kiln.output("lin5", kiln.linear(x5, w))
kiln.output("lin1", kiln.linear(x1, w, b))
kiln.output("linb", kiln.linear(xb, w))
kiln.output("kn13", kiln.matmul(x13, u))
kiln.output("wx", kiln.matmul(v, col))
kiln.output("act", kiln.matmul(a, c))
kiln.output("act_t", kiln.matmul(a, ct, {trans_b = true}))
kiln.output("narrow28", kiln.linear(x28, wn))
kiln.output("act_t28", kiln.matmul(a28, ct, {trans_b = true}))
kiln.output("heads_mask", kiln.matmul(qh, kh, {trans_b = true}) * 0.25 + mask)
kiln.output("rows_mask", kiln.matmul(xr, wr) + mask)
local qa = kiln.input("qa", {4, 37, 5})                            -- 4 query heads over 2 K/V heads
local ka = kiln.input("ka", {2, 60, 5})
local va = kiln.input("va", {2, 60, 5})
kiln.output("attn_prefill", kiln.sdpa(qa, ka, va, {len = 58, pos = 12}))
kiln.output("attn_window", kiln.sdpa(qa, ka, va, {len = 70, pos = 33, window = 20}))   -- a ring of 60 slots
