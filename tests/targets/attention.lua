-- Fused attention (kiln.sdpa) on every target: a decode row and a prefill chunk at a run-time
-- position over grouped K/V, a fused epilogue, a non-causal call, a sliding window over the
-- plain cache, and a window over K/V read as a ring (len past S: position p in slot
-- p mod 16), and a 32-row prefill over a ring of 40 slots that wraps inside its keys (the C
-- target's blocked kernel: t_compile runs it under ASan). t_metal runs it on the emulator,
-- t_coreml through milrun, each compared with the C target.
local kiln = require "kiln"
local pos = kiln.input("pos", {}, "i32")
local k = kiln.input("k", {2, 16, 5})
local v = kiln.input("v", {2, 16, 5})
local q1 = kiln.input("q1", {4, 1, 5})
local q4 = kiln.input("q4", {4, 4, 5})
kiln.output("decode", kiln.sdpa(q1, k, v, {len = pos + 1, pos = pos}))
kiln.output("chunk", kiln.sdpa(q4, k, v, {len = pos + 4, pos = pos}) * 2 + 1)
kiln.output("bidirectional", kiln.sdpa(q4, k, v, {len = 9, causal = false}))
kiln.output("window", kiln.sdpa(q4, k, v, {len = pos + 4, pos = pos, window = 3}))
kiln.output("ring", kiln.sdpa(q4, k, v, {len = pos + 20, pos = pos + 16, window = 6}))
local q32 = kiln.input("q32", {2, 32, 5})
local kr = kiln.input("kr", {1, 40, 5})
local vr = kiln.input("vr", {1, 40, 5})
kiln.output("ring_prefill", kiln.sdpa(q32, kr, vr, {len = pos + 60, pos = pos + 28, window = 24}))
