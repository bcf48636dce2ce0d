-- expect: tests/frontend/bad_param_name.lua:3: error: kiln.input: name 'int' is a C keyword
local kiln = require "kiln"
local x = kiln.input("int", {2, 3})
kiln.output("y", x)
