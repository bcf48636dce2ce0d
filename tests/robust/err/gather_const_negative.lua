local x = kiln.input("x", {5, 3})
kiln.output("y", x:gather(kiln.constant({{0, -1}}, nil, "i32"), 1))
