-- tinystate.lua — the golden model with state and two entry points (t_golden pins its
-- generated tinystate.h, .c and .json): a cache of 6 rows of 4 values that `prefill`
-- fills 2 rows at a time and `decode` one row, each at a run-time position `pos`, both
-- scoring their rows against the whole cache. `decode` also sums the cache as the call
-- found it: that read is traced after the write but must run before it.
local kiln = require "kiln"

local cache = kiln.state("cache", {6, 4})
local proj = kiln.param("proj.weight", {4, 3}, {"uniform", -0.5, 0.5})   -- shared by both entries

kiln.entry("prefill", function()
  local x = kiln.input("x", {2, 3})
  local pos = kiln.input("pos", {}, "i32")
  local k = kiln.linear(x, proj)                             -- [2, 4]
  kiln.write(cache, k, {axis = 0, at = pos})                 -- rows pos, pos + 1
  kiln.output("scores", kiln.matmul(k, cache, {trans_b = true}))   -- [2, 6]
end)

kiln.entry("decode", function()
  local x = kiln.input("x", {1, 3})
  local pos = kiln.input("pos", {}, "i32")
  local old = cache:reshape(24)                              -- the cache as the call found it
  local k = kiln.linear(x, proj)
  kiln.write(cache, k, {axis = 0, at = pos})                 -- row pos
  kiln.output("scores", kiln.matmul(k, cache, {trans_b = true}))   -- [1, 6]
  kiln.output("old_total", kiln.sum(old))
end)
