-- expect: tests/frontend/bad_conv_nn.lua:4: error: conv2d: input has 1 channels, weight expects 3 (groups 1): x [1, 1, 8, 8], w [6, 3, 5, 5] (in nn.Conv2d '0', called at tests/frontend/bad_conv_nn.lua:7)
local kiln = require "kiln"
local nn = require "kiln.nn"
local net = nn.Sequential { nn.Conv2d(3, 6, 5), nn.ReLU() }
local x = kiln.input("image", {1, 1, 8, 8})
kiln.output("y",
  net(x))
