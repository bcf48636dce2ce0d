local x = kiln.input("x", {4})
kiln.output("y", x:reshape(4611686018427387904, 4611686018427387904))
-- expect: tests/robust/err/reshape_overflow2.lua:2: error: reshape: cannot reshape [4] (4 elements) into [4611686018427387904, 4611686018427387904]
