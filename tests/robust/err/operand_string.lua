local x = kiln.input("x", {2})
kiln.output("y", x * "3")
-- expect: tests/robust/err/operand_string.lua:2: error: mul: argument 2 must be a tensor or a number, got string
