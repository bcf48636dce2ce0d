-- expect: tests/frontend/bad_method.lua:4: error: tensor has no field or method 'frob'
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
kiln.output("y", x:frob())
