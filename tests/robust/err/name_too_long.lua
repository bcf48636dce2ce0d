local x = kiln.input("x", {4})
kiln.output(string.rep("y", 256), x + 1)
-- expect: tests/robust/err/name_too_long.lua:2: error: kiln.output: a name of 256 characters; Kiln allows at most 255 (it becomes C identifiers and string literals)
