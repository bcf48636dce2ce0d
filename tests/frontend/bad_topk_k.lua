-- topk with k larger than the dim: one line naming the script line and the shapes
-- expect: tests/frontend/bad_topk_k.lua:5: error: topk: k = 50 is not in [1, 40] for [4, 40] along dim 1
local kiln = require "kiln"
local x = kiln.input("x", {4, 40})
local v, i = kiln.topk(x, 50)
kiln.output("v", v)
