local x = kiln.input("x", {5, 3})
kiln.output("y", x:gather(kiln.constant({{0, -1}}, nil, "i32"), 1))
-- expect: tests/robust/err/gather_const_negative.lua:2: error: gather: constant index -1 (entry 1) is out of range for dim 1 of [5, 3] (0..2)
