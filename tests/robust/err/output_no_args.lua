kiln.output()
