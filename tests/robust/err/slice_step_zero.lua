local x = kiln.input("x", {4})
kiln.output("y", x:slice(0, 0, 4, 0))
