-- tokstate.lua — i64 token ids into an entry with state on the Metal target
-- (tests/py/run_metal_i64.py): `step` embeds two tokens, writes their rows into a cache
-- at run-time position `pos` and scores them against the whole cache. A call with an id
-- outside int32 must return E_RANGE before its write, on Metal as in C.
local kiln = require "kiln"

local cache = kiln.state("cache", {6, 4})
local table = kiln.param("emb.weight", {10, 4}, {"uniform", -1, 1})

kiln.entry("step", function()
  local tokens = kiln.input("tokens", {2}, "i64")
  local pos = kiln.input("pos", {}, "i32")
  local e = kiln.embedding(table, tokens)                    -- [2, 4]
  kiln.write(cache, e, {axis = 0, at = pos})                 -- rows pos, pos + 1
  kiln.output("scores", kiln.matmul(e, cache, {trans_b = true}))   -- [2, 6]
end)
