-- expect: tests/frontend/bad_output_nontensor.lua:4: error: kiln.output: argument 2 must be a tensor, got number
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
kiln.output("y", 3)
