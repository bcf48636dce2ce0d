local x = kiln.input("héllo", {4})
