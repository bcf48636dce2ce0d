local nn = kiln.nn
local M = nn.Module("M")
function M:forward(x) return self(x) end
kiln.output("y", M()(kiln.input("x", {4})))
-- expect: tests/robust/err/module_recursion.lua:4: error: stack overflow
