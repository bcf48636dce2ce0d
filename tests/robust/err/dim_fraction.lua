local x = kiln.input("x", {2.5})
