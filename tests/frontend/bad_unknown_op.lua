-- expect: tests/frontend/bad_unknown_op.lua:4: error: unknown op 'frobnicate'
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
local y = kiln.frobnicate(x)
kiln.output("y", y)
