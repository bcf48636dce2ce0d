local x = kiln.input("x", {4})
os.execute("touch /tmp/kiln-sandbox-pwned")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_os_execute.lua:2: error: os.execute is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see docs/lua-api.md)
