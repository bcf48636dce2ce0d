local x = kiln.input("x", {1099511627776, 1099511627776})
