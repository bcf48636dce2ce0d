local w = kiln.param("", {4})
