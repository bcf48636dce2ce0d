-- expect: tests/frontend/bad_dup_io_name.lua:4: error: kiln.output: name 'X' is already used by input 'x' (names must differ even in case)
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
kiln.output("X", x * 2)
