local x = kiln.input("x", {4})
kiln.output("y", x:relu())
os.exit(0)
-- expect: tests/robust/err/os_exit.lua:3: error: os.exit is not available in a model script (raise an error with error(), or just return)
-- flags: --unsafe-lua
