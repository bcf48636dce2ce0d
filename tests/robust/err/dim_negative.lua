local w = kiln.param("w", {4, -3})
