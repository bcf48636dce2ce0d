-- expect: tests/frontend/bad_input_name.lua:3: error: kiln.input: name 'my-image' is not a C identifier (letters, digits, _; not starting with a digit)
local kiln = require "kiln"
local x = kiln.input("my-image", {1, 784})
kiln.output("y", x * 2)
