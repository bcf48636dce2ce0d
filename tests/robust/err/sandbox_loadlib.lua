local x = kiln.input("x", {4})
local f = package.loadlib("libc.so.6", "system")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_loadlib.lua:2: error: package.loadlib is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
