local w = kiln.param("w", {1048576, 1048576})
