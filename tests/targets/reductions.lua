-- reductions.lua — argmax/argmin and the min and product reductions on every target:
-- t_metal and t_coreml compare the Metal emulator and the Core ML checker with the C
-- target, t_compile and t_determinism build it. Lines of 40 take Metal's reduction past
-- its 16-element one-thread form; argmax feeds a fused cast.
local kiln = require "kiln"

local x = kiln.input("x", {4, 40})
local y = kiln.input("y", {3, 5, 6})
kiln.output("mn", x:amin(1) + kiln.amin(y, {0, 2}):sum())
kiln.output("pr", kiln.prod(y, 2) + kiln.prod(y, {0, 1}, true):sum())
kiln.output("amx", kiln.argmax(x, 1))
kiln.output("amn", kiln.argmin(y, 1, true))
kiln.output("flat", kiln.cast(y:argmax(), "f32") * 0.5)
