-- expect: tests/frontend/bad_sdpa_window_size.lua:6: error: sdpa: window must be an integer in [1, 2^31), got 0
local kiln = require "kiln"
local q = kiln.input("q", {2, 3, 4})
local k = kiln.input("k", {1, 5, 4})
local v = kiln.input("v", {1, 5, 4})
kiln.output("y", kiln.sdpa(q, k, v, {window = 0}))
