local x = kiln.input("x", {4})
kiln.output("y", x:reshape(-1, -1))
