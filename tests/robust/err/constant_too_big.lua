local c = kiln.constant(1, {100000, 100000})
