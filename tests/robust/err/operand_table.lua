local x = kiln.input("x", {2})
kiln.output("y", kiln.add(x, {1, 2}))
