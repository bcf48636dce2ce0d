local kiln = require "kiln"
local x = kiln.input("x", {4})
kiln.output("y", kiln.remainder(x, 3))
