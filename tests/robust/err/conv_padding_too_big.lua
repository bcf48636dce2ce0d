local x = kiln.input("x", {1, 1, 4, 4})
local w = kiln.param("w", {1, 1, 1, 1})
kiln.output("y", kiln.conv2d(x, w, {padding = 1048576}))
