local x = kiln.input("x", {4})
local f = io.open("kiln-sandbox-written.txt", "w")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_io_write.lua:2: error: io.open is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
