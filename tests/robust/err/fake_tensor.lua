local x = kiln.input("x", {4})
debug.setmetatable(io.stdout, debug.getmetatable(x))
kiln.output("y", x + io.stdout)
-- expect: tests/robust/err/fake_tensor.lua:3: error: a userdata posing as a tensor (its metatable was set by hand)
-- flags: --unsafe-lua
