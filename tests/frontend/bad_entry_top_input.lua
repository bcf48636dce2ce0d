-- expect: tests/frontend/bad_entry_top_input.lua:6: error: kiln.input: outside kiln.entry in a script with entries (inputs belong to an entry)
local kiln = require "kiln"
kiln.entry("a", function()
  kiln.output("y", kiln.input("x", {2}) * 1)
end)
local x = kiln.input("x", {2})
