local x = kiln.input("x", {4})
local p = io.popen("id")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_io_popen.lua:2: error: io.popen is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
