local x = kiln.input("x", {4})
kiln.output("y", x + 1)
-- expect: tests/robust/err/stdio.lua: error: the model's stdio.h would shadow the C header <stdio.h>; rename the script or pass --name
