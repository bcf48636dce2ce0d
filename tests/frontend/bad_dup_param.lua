-- expect: tests/frontend/bad_dup_param.lua:5: error: param weight is already defined at tests/frontend/bad_dup_param.lua:7 (two modules with the same path? give one a prefix with nn.name) (in nn.Linear, called at tests/frontend/bad_dup_param.lua:8)
local kiln = require "kiln"
local nn = require "kiln.nn"
local a = nn.Linear(4, 4)
local b = nn.Linear(4, 4)
local x = kiln.input("x", {1, 4})
local h = a(x)
kiln.output("y", b(h))
