-- expect: tests/frontend/bad_nn_arg.lua:4: error: nn.Linear: in_features must be an integer, got a
local kiln = require "kiln"
local nn = require "kiln.nn"
local fc = nn.Linear("a", 3)
kiln.output("y", fc(kiln.input("x", {1, 3})))
