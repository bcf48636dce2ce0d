local x = kiln.input("x", {2, 3})
kiln.output("y", x:permute("a", 1))
-- expect: tests/robust/err/permute_string.lua:2: error: permute: dim must be an integer, got string
