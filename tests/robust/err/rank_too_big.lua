local x = kiln.input("x", {1, 1, 1, 1, 1, 1, 1})
