-- expect: tests/frontend/bad_entry_no_outputs.lua:6: error: entry idle has no outputs and writes no state (call kiln.output inside it)
local kiln = require "kiln"
kiln.entry("busy", function()
  kiln.output("y", kiln.input("x", {2}) * 1)
end)
kiln.entry("idle", function()
  local x = kiln.input("x", {2})
end)
