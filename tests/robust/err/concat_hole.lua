local x = kiln.input("x", {2, 3})
kiln.output("y", kiln.concat({x, nil, x}, 1))
