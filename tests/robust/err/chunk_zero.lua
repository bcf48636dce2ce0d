local x = kiln.input("x", {4})
kiln.output("y", (x:chunk(0)))
-- expect: tests/robust/err/chunk_zero.lua:2: error: chunk: the number of chunks 0 must be >= 1
