-- expect: tests/frontend/bad_syntax.lua:4: error: unexpected symbol near '*'
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
local y = x + * 2
kiln.output("y", y)
