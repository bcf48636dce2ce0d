-- remainder.lua — torch.remainder (Python's %) on every target: f32 and i32, by a constant
-- and by a computed divisor that may be 0 (Kiln: 0 for i32, NaN for f32; Core ML guards
-- MIL's mod there). t_metal and t_coreml compare with the C target.
local kiln = require "kiln"

local x = kiln.input("x", {3, 5})
local k = kiln.input("k", {3, 5}, "i32")       -- t_coreml draws i32 inputs in [0, 4)
kiln.output("f", kiln.remainder(x * 7, 2.5) + kiln.remainder(x * 3, x - 0.25))
kiln.output("i", kiln.remainder(k * 5 - 7, 3) + kiln.remainder(k * 3 - 4, k - 1))
