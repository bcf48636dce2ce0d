-- onefn.lua — a stateful model without kiln.entry (one Core ML function, `main`, with a
-- state) for tests/coreml/mock/run.sh: each call writes its row x at a run-time `pos`.
local kiln = require "kiln"

local rows = kiln.state("rows", {4, 2})
local x = kiln.input("x", {1, 2})
local pos = kiln.input("pos", {}, "i32")
kiln.write(rows, x, {axis = 0, at = pos})
kiln.output("total", kiln.sum(rows))
