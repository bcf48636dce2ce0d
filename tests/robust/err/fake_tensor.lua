local x = kiln.input("x", {4})
debug.setmetatable(io.stdout, debug.getmetatable(x))
kiln.output("y", x + io.stdout)
