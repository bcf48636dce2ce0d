local x = kiln.input("x", {2, 3})
kiln.output("y", x:permute("a", 1))
