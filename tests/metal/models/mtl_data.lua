-- mtl_data.lua — Metal test model: data movement (transpose/permute, slice with
-- steps, concat, gather/embedding, reshape views) and reductions of every size.
local kiln = require "kiln"
local nn = require "kiln.nn"
local x = kiln.input("x", {2, 3, 37, 5})
local ids = kiln.input("ids", {7}, "i32")
local perm = kiln.permute(x, {3, 0, 2, 1})
local sl = kiln.slice(perm, 2, 1, 36, 3)
kiln.output("sl", kiln.transpose(sl, 0, 3))
kiln.output("cat", kiln.concat({x, x * 2, kiln.slice(x, 1, 0, 1)}, 1))
local emb = nn.Embedding(11, 9)
kiln.output("emb", emb(ids))
kiln.output("g1", kiln.gather(x, ids, 2))
kiln.output("s_all", kiln.sum(x))
kiln.output("s_mid", kiln.mean(x, {1, 3}, true))
kiln.output("s_big", kiln.amax(kiln.reshape(x, {6, 185}), 1))
kiln.output("s_small", kiln.sum(x, 3))
kiln.output("s_300", kiln.sum(kiln.reshape(x, {1110}):slice(0, 0, 300)))
