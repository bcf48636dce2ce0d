local x = kiln.input("x", {4})
kiln.output("y", x:cast("i32"):cast("bool"):relu())
-- expect: tests/robust/err/cast_chain_bad.lua:2: error: relu: operands must be f32, input 0 is bool[4]
