local w = kiln.param("a\0b", {4})
