local x = kiln.input("x\0y", {4})
