-- Outputs that are a weight, a constant and the same tensor twice.
local x = kiln.input("x", {4})
local w = kiln.param("w", {4}, {"uniform", -1, 1})
local c = kiln.constant({1, 2, 3, 4}, {4})
kiln.output("w", w)
kiln.output("c", c)
local y = x * w + c
kiln.output("y", y)
kiln.output("y_again", y)
