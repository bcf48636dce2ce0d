-- expect: tests/frontend/bad_entry_name.lua:4: error: kiln.entry: entry 'decode' is already defined (names must differ even in case)
local kiln = require "kiln"
kiln.entry("decode", function() kiln.output("y", kiln.input("x", {2}) * 1) end)
kiln.entry("Decode", function() kiln.output("y", kiln.input("x", {2}) * 1) end)
