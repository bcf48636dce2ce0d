-- expect: tests/frontend/bad_sdpa_window.lua:6: error: sdpa: window needs causal attention (a window looks back from each row)
local kiln = require "kiln"
local q = kiln.input("q", {2, 3, 4})
local k = kiln.input("k", {1, 5, 4})
local v = kiln.input("v", {1, 5, 4})
kiln.output("y", kiln.sdpa(q, k, v, {causal = false, window = 2}))
