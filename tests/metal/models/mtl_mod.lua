-- mtl_mod.lua — Metal test model: fmod and remainder (f32 with mixed signs, and i32,
-- whose divisor 0 gives 0), and round_f16 (float(half(x)) in MSL) against the C target.
local kiln = require "kiln"
local a = kiln.input("a", {3, 7})
local b = kiln.input("b", {7})
local i = kiln.input("i", {2, 9}, "i32")
local j = kiln.input("j", {9}, "i32")
kiln.output("f", kiln.fmod(a * 10, b))
kiln.output("r", kiln.remainder(a * 10, b) + kiln.round_f16(a * 1000))
kiln.output("fi", kiln.fmod(i, j) + kiln.remainder(i, j))
