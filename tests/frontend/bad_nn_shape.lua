-- expect: tests/frontend/bad_nn_shape.lua:6: error: linear: input [1, 100] has 100 features, weight [10, 784] expects 784 (in nn.Linear '0', called at tests/frontend/bad_nn_shape.lua:9)
local kiln = require "kiln"
local nn = require "kiln.nn"
local x = kiln.input("x", {1, 100})
local model = nn.Sequential {
  nn.Linear(784, 10),
  nn.ReLU(),
}
local y = model(x)
kiln.output("y", y)
