-- expect: tests/frontend/bad_entry_reserved.lua:3: error: kiln.entry: name 'State' is reserved (a C keyword, or one of reset, weights, state, arena: the generated <model>_reset and <MODEL>_WEIGHTS_/STATE_/ARENA_ macros)
local kiln = require "kiln"
kiln.entry("State", function() kiln.output("y", kiln.input("x", {2}) * 1) end)
