-- expect: tests/frontend/bad_entry_state_inside.lua:4: error: kiln.state: declare states at the top level of the script, not inside kiln.entry
local kiln = require "kiln"
kiln.entry("decode", function()
  local s = kiln.state("s", {4})
  kiln.output("y", s * 1)
end)
