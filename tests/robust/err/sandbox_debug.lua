local x = kiln.input("x", {4})
debug.sethook(print, "l")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_debug.lua:2: error: debug.sethook is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
