local x = kiln.input("x", {65536, 65536})
