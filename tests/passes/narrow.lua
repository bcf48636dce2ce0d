-- pass_narrow: the last row of a block's output (an LLM prefill's logits) narrows what
-- only that slice reads: the residual add, the feed-forward products and the norm compute
-- one row. It stops at h (the norm's input is the add's too, but both read the same one
-- row, so h narrows; then x + mix: x is read whole by the attention-like product), at a
-- softmax over the sliced axis, and at a weight product's columns (the slice "cols").
local kiln = require "kiln"
local nn = require "kiln.nn"
local x = kiln.input("x", {6, 8})
local up = nn.name(nn.Linear(8, 16), "up")
local down = nn.name(nn.Linear(16, 8), "down")
local norm = nn.name(nn.RMSNorm(8), "norm")
local mix = kiln.matmul(kiln.softmax(kiln.matmul(x, x, {trans_b = true}), 0), x)
local h = x + mix
local y = h + down(kiln.gelu(up(norm(h))))
kiln.output("last", kiln.slice(y, 0, 5, 6))
kiln.output("cols", kiln.slice(kiln.relu(up(x)), 1, 0, 4))
-- RoPE's halves: the row slice moves through the slices of later axes, which then read one
-- row each; cse makes them one, so rot's product narrows to that row too.
local rot = nn.name(nn.Linear(8, 8, {bias = false}), "rot")
local q = rot(x)
local half = kiln.concat({-kiln.slice(q, 1, 4, 8), kiln.slice(q, 1, 0, 4)}, 1)
kiln.output("rope", kiln.slice(q * 2 + half, 0, 5, 6))
-- What it leaves: the slice of an i64 input stays under its cast to i32 (only the cast may
-- read an i64 value), and a softmax over axis 0 sliced along axis 1 keeps its inner size
-- (with an inner size of 1 its sum would go another way: other bits over 40 rows).
local ids = kiln.input("ids", {2, 5}, "i64")
local emb = nn.name(nn.Embedding(10, 4), "emb")
kiln.output("last_id", emb(kiln.slice(ids, 1, 4, 5)))
kiln.output("col", kiln.slice(kiln.softmax(kiln.input("z", {40, 3}) * 3, 0), 1, 2, 3))
-- Attention over heads, spelled as the bench's Llama spells it: the query product split into
-- 2 heads of 4 and permuted, scores against every row with a causal mask, softmax, times
-- the values, permuted back. The last row narrows the query product, the permutes and
-- reshapes, the scores, the softmax and the mask (a constant: fold2 slices it); the keys
-- and values, read whole, do not.
local heads = nn.name(nn.Linear(8, 8, {bias = false}), "heads")
local hq = heads(x):reshape(6, 2, 4):permute(1, 0, 2)
local hk = kiln.relu(x):reshape(6, 2, 4):permute(1, 0, 2)
local causal = {}
for i = 0, 5 do
  for j = 0, 5 do causal[#causal + 1] = j <= i and 0 or -1e9 end
end
local scores = kiln.matmul(hq, hk, {trans_b = true}) * 0.5 + kiln.constant(causal, {6, 6})
local att = kiln.matmul(kiln.softmax(scores, -1), hk):permute(1, 0, 2):reshape(6, 8)
kiln.output("heads", kiln.slice(att, 0, 5, 6))
-- A gather of rows by a vector of indices (llm.lua's prefill_logits=last) moves as a slice
-- does, each input taking the same indices: the product and relu compute the picked row.
-- A weight is never gathered (it would be stored as an embedding's table), so the gather
-- stops at the add of "table".
local row = kiln.reshape(kiln.input("row", {}, "i32"), {1})
local pick = nn.name(nn.Linear(8, 8), "pick")
kiln.output("picked", kiln.gather(kiln.relu(pick(x)) + x, row))
kiln.output("tabled", kiln.gather(kiln.relu(x) + kiln.param("table", {6, 8}), row))
-- A gather with as many indices as rows or more stays where it is: a beam expansion (4 rows
-- out of 1) could not move through the mul, whose input is read whole along its size-1 axis,
-- and 6 rows out of 6 would save nothing.
local beams = kiln.input("beams", {4}, "i32")
kiln.output("beamed", kiln.gather(kiln.relu(kiln.input("h", {1, 5, 8})) * 0.5, beams, 0))
local permuted = nn.name(nn.Linear(8, 8), "permuted")
kiln.output("all_rows", kiln.gather(kiln.relu(permuted(x)), kiln.input("perm", {6}, "i32")))
