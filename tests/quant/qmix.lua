-- qmix.lua — one pair of matrix weights per stored format (docs/quantization.md), read the
-- three ways a stored weight is read: as a Linear weight (one row of activations, the decode
-- case, and 13 rows, prefill), as the W of a matrix-vector product W x, and as an embedding
-- table. row0_F is lin13_F's first row again, through the one-row kernel (kiln_qdot_*): it
-- must equal lin13_F's row bit for bit where the relu left it. Row counts (70, 40) leave the last 32-row panel partial. Built with the rules in
-- qmix.args (w_F and v_F stored as F); t_qkernels compares the generated C with the
-- interpreter and numpy, t_isa compares the bits of every instruction-set path.
local kiln = require "kiln"
kiln.seed(11)

local K = 512
local x1 = kiln.input("x1", {1, K})
local x13 = kiln.input("x13", {13, K})
local col = kiln.input("col", {K, 1})
local ids = kiln.input("ids", {5}, "i32")

for _, f in ipairs {"f16", "bf16", "i8", "q8_0", "q4_0", "q4_k", "q6_k", "g8", "g4"} do
  local w = kiln.param("w_" .. f, {70, K}, {"normal", 0, 1})
  local v = kiln.param("v_" .. f, {40, K}, {"normal", 0, 1})
  local b = kiln.param("b_" .. f, {70}, {"normal", 0, 1})
  kiln.output("lin1_" .. f, kiln.linear(x1, w, b))
  kiln.output("lin13_" .. f, kiln.relu(kiln.linear(x13, w)))
  kiln.output("row0_" .. f, kiln.linear(kiln.slice(x13, 0, 0, 1), w))
  kiln.output("wx_" .. f, kiln.matmul(v, col))
  kiln.output("emb_" .. f, kiln.embedding(v, ids))
end

-- An f32 table read both by a gather and as a Linear weight (a tied embedding and
-- classifier): pass_pack stores it in panels, and the gather reads its rows from them.
local tied = kiln.param("tied", {40, K}, {"normal", 0, 1})
kiln.output("tied_emb", kiln.embedding(tied, ids))
kiln.output("tied_lin", kiln.linear(x1, tied))
