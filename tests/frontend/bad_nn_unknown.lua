-- expect: tests/frontend/bad_nn_unknown.lua:4: error: unknown nn module 'Linaer'
local kiln = require "kiln"
local nn = require "kiln.nn"
local fc = nn.Linaer(3, 3)
