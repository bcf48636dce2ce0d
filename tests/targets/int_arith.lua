-- i32 arithmetic on every target: wrapping add/sub/mul, max/min, neg/abs, comparisons against
-- a run-time position, a fused i32 chain, promotion to f32. t_metal runs it on the emulator,
-- t_coreml through milrun, each compared with the C target.
local kiln = require "kiln"
local pos = kiln.input("pos", {}, "i32")
local v = kiln.input("v", {4, 8}, "i32")
local f = kiln.input("f", {8})
kiln.output("next", pos + 1)
kiln.output("w", (v * 3 - pos):neg():abs())
kiln.output("m", kiln.min(kiln.max(v, pos), 5))
kiln.output("seen", v:le(pos + 2))
kiln.output("mixed", f * v + 0.5)
