-- NaN and infinities in constants and results travel bit-exactly (up to the NaN payload).
local x = kiln.input("x", {4})
local c = kiln.constant({0 / 0, 1 / 0, -1 / 0, 0}, {4})
kiln.output("sum", x + c)
kiln.output("div", x / kiln.constant(0))
kiln.output("nan_cmp", c:eq(c))
