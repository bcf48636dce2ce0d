local x = kiln.input("x", {2})
kiln.output("y", x + nil)
-- expect: tests/robust/err/operand_nil.lua:2: error: add: argument 2 must be a tensor or a number, got nil
