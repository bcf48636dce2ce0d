-- expect: tests/frontend/bad_entry_import.lua:10: error: a tensor from entry 'prefill' (mul, tests/frontend/bad_entry_import.lua:6) depends on input 'x' there, so it cannot be used in entry 'decode': compute it inside this entry (only values made from parameters and constants are shared)
local kiln = require "kiln"
local cached
kiln.entry("prefill", function()
  local x = kiln.input("x", {2})
  cached = x * 2
  kiln.output("y", cached)
end)
kiln.entry("decode", function()
  kiln.output("y", cached + 1)
end)
