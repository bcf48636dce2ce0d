local x = kiln.input("x", {1 / 0})
