local x = kiln.input("x", {4})
kiln.load("/etc/hostname")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_load_outside.lua:2: error: kiln.load: /etc/hostname is outside the script's directory; the sandbox reads only files below it (--unsafe-lua lifts this)
