local x = kiln.input("x", {4})
kiln.output("y", x:cast("f64"))
-- expect: tests/robust/err/cast_unknown.lua:2: error: cast: dtype must be "f32", "i32" or "bool", got f64
