local x = kiln.input("x", {4})
local n = 0
while true do n = n + 1 end
kiln.output("y", x)
-- flags: --lua-max-instructions 2000000
-- expect: tests/robust/err/sandbox_infinite_loop.lua:3: error: the model script ran more than 2000000 Lua instructions (raise the budget with --lua-max-instructions N, 0 = none)
