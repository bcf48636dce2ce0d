local kiln = require "kiln"
local x = kiln.input("x", {4})
kiln.output("y", kiln.fmod(x, 3))
