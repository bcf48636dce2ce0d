local w = kiln.param("", {4})
-- expect: tests/robust/err/name_empty_param.lua:1: error: kiln.param: argument 1 (the name) is empty
