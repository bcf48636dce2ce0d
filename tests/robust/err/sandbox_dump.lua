local x = kiln.input("x", {4})
local b = string.dump(function() return 1 end)
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_dump.lua:2: error: string.dump is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
