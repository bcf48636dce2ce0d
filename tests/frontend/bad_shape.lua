-- expect: tests/frontend/bad_shape.lua:5: error: add: shapes [2, 3] and [4] do not broadcast
local kiln = require "kiln"
local a = kiln.input("a", {2, 3})
local b = kiln.input("b", {4})
local c = a + b
kiln.output("c", c)
