local x = kiln.input("x", {2})
kiln.output("y", kiln.add(x, {1, 2}))
-- expect: tests/robust/err/operand_table.lua:2: error: add: argument 2 must be a tensor or a number, got table
