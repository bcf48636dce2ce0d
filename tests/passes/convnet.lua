-- Conv, batchnorm, pool, flatten (a view between two kernels), softmax.
local kiln = require "kiln"
local nn = require "kiln.nn"
local x = kiln.input("img", {1, 3, 8, 8})
local net = nn.Sequential {
  nn.Conv2d(3, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(1), nn.Linear(64, 10), nn.Softmax(-1),
}
kiln.output("probs", net(x))
