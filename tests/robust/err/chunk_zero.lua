local x = kiln.input("x", {4})
kiln.output("y", (x:chunk(0)))
