-- expect: tests/frontend/bad_runtime.lua:5: error: attempt to perform arithmetic on a nil value (global 'undefined_thing')
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
local function helper(t)
  return t + undefined_thing * 2
end
kiln.output("y", helper(x))
