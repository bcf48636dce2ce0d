local x = kiln.input("x", {5, 3})
kiln.output("y", kiln.gather(x, kiln.constant({0, 1}, {2}), 0))
-- expect: tests/robust/err/gather_f32_indices.lua:2: error: gather: indices must be i32, got f32[2]
