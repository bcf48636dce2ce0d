local w = kiln.param("a\0b", {4})
-- expect: tests/robust/err/name_nul_param.lua:1: error: kiln.param: argument 1 (the name) contains a NUL byte
