local x = kiln.input(5, {4})
-- expect: tests/robust/err/name_number_input.lua:1: error: kiln.input: argument 1 (the input's name) must be a string, got number
