-- expect: tests/frontend/bad_reshape.lua:4: error: reshape: cannot reshape [2, 3] (6 elements) into [4, -1]
local kiln = require "kiln"
local x = kiln.input("x", {2, 3})
kiln.output("y", x:reshape(4, -1))
