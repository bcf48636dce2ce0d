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
