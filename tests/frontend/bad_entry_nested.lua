-- expect: tests/frontend/bad_entry_nested.lua:4: error: kiln.entry: entries do not nest (this is inside entry 'outer')
local kiln = require "kiln"
kiln.entry("outer", function()
  kiln.entry("inner", function() end)
end)
