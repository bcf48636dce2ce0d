local x = kiln.input("x", {2})
kiln.output("y", x.relu(nil))
