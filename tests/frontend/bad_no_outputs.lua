-- expect: tests/frontend/bad_no_outputs.lua: error: no outputs: the script must call kiln.output(name, tensor)
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
local y = x * 2
