local function f(n) return f(n + 1) + 1 end
local x = kiln.input("x", {4})
kiln.output("y", x + f(1))
-- expect: tests/robust/err/recursion.lua:1: error: stack overflow
