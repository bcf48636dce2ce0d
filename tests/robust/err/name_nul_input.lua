local x = kiln.input("x\0y", {4})
-- expect: tests/robust/err/name_nul_input.lua:1: error: kiln.input: argument 1 (the input's name) contains a NUL byte
