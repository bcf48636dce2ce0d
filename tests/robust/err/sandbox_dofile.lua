local x = kiln.input("x", {4})
dofile("/etc/passwd")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_dofile.lua:2: error: dofile is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
