-- sorting.lua — topk, sort, argsort and gather_elements (take_along_dim) on every target:
-- t_metal and t_coreml compare the Metal emulator and the Core ML checker with the C
-- target, t_compile and t_determinism build it. Lines of 5 to 40 along the last, the
-- middle and the first dim; a fused cast after an argsort; gathers of f32 and i32.
local kiln = require "kiln"

local x = kiln.input("x", {4, 40})
local y = kiln.input("y", {3, 5, 2})
local ids = kiln.input("ids", {3, 4, 2}, "i32")
local v, i = kiln.topk(x, 5)
kiln.output("top_v", v)
kiln.output("top_i", i)
local sv, si = kiln.sort(y, 1, true)
kiln.output("sort_v", sv)
kiln.output("sort_i", si)
local lv, li = y:topk(2, 0, false)
kiln.output("low", lv + kiln.cast(li, "f32"))
kiln.output("rank", kiln.cast(kiln.argsort(x, 1), "f32") * 0.5)
kiln.output("take", kiln.take_along_dim(y, ids, 1) + kiln.cast(kiln.gather_elements(si, ids, 1), "f32"))
-- many equal values (integers from the floor): equal ones must keep their index order
local tv, ti = kiln.sort(kiln.floor(x), 1, true)
kiln.output("ties", tv + kiln.cast(ti, "f32") * 0.01)
