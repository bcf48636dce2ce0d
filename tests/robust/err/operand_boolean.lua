local x = kiln.input("x", {2})
kiln.output("y", kiln.max(true, x))
-- expect: tests/robust/err/operand_boolean.lua:2: error: max: argument 1 must be a tensor or a number, got boolean
