-- ring.lua — a sliding-window attention cache kept as a ring, as models/llm.lua keeps
-- Gemma 3's local layers: WINDOW + PREFILL - 1 slots, position p in slot p mod that size
-- (kiln.write {ring = true}), read back through sdpa {window = WINDOW}. A prefill may
-- wrap the ring in the middle of its rows; every call sees only its window.
local kiln = require "kiln"
local H, KV, D, WINDOW, PREFILL = 2, 1, 4, 3, 2
local SLOTS = WINDOW + PREFILL - 1
local keys = kiln.state("k", {KV, SLOTS, D})
local values = kiln.state("v", {KV, SLOTS, D})

-- T new rows at position pos: stored, then attended to by T queries.
local function step(T)
  local q = kiln.input("q", {H, T, D})
  local k = kiln.input("kn", {KV, T, D})
  local v = kiln.input("vn", {KV, T, D})
  local pos = kiln.input("pos", {}, "i32")
  kiln.write(keys, k, {axis = 1, at = pos, ring = true})
  kiln.write(values, v, {axis = 1, at = pos, ring = true})
  kiln.output("out", kiln.sdpa(q, keys, values, {len = pos + T, pos = pos, window = WINDOW}))
end

kiln.entry("prefill", function() step(PREFILL) end)
kiln.entry("decode", function() step(1) end)
