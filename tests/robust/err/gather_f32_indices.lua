local x = kiln.input("x", {5, 3})
kiln.output("y", kiln.gather(x, kiln.constant({0, 1}, {2}), 0))
