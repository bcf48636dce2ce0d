local x = kiln.input("x", {0, 3})
