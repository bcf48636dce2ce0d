local x = kiln.input("x", {4})
kiln.output("y", x == x)
-- expect: tests/robust/err/output_boolean.lua:2: error: kiln.output: argument 2 must be a tensor, got boolean
