kiln.output("y", kiln.concat({}, 0))
