local x = kiln.input(5, {4})
