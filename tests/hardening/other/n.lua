-- Another model, for the "one model per output directory" check.
local kiln = require "kiln"
local x = kiln.input("x", {2})
kiln.output("y", x + 1)
