local kiln = require "kiln"
local x = kiln.input("x", {4})
kiln.output("y", kiln.round_f16(x))
