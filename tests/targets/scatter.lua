-- scatter.lua — scatter, index_copy and index_put on every target: t_metal and t_coreml
-- compare the Metal emulator and the Core ML checker with the C target, t_compile and
-- t_determinism build it. The indices are run-time inputs (t_coreml draws them from
-- [0, 4), so duplicate targets occur: the last must win everywhere).
local kiln = require "kiln"

local x = kiln.input("x", {3, 6, 2})
local i = kiln.input("i", {3, 5, 2}, "i32")
local s = kiln.input("s", {3, 5, 2})
local r = kiln.input("r", {3}, "i32")
local t = kiln.input("t", {4, 5})
kiln.output("sc", kiln.scatter(x, 1, i, s))
kiln.output("scv", kiln.relu(kiln.scatter(x, 1, i, -1.5)))
kiln.output("ic", kiln.index_copy(t, 0, r, kiln.input("rows", {3, 5})))
kiln.output("ip", kiln.index_put(kiln.cast(t, "i32"), {r}, 7))
kiln.output("icb", kiln.index_copy(x:gt(0), 1, kiln.input("c", {1}, "i32"), x:lt(0):slice(1, 0, 1)))
