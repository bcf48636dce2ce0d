-- noop.lua — peer benchmark workload noop: y = x + 1 on 16 floats, the fixed cost of a call.
local kiln = require "kiln"
local x = kiln.input("x", {16})
kiln.output("y", x + 1)
