-- lenet.lua — a LeNet-5-style convolutional network on one 1x28x28 image.
--
-- conv 5x5 (padding 2) -> tanh -> maxpool 2 -> conv 5x5 -> tanh -> maxpool 2 ->
-- flatten -> 400-120-84-10 with ReLU between the linear layers. Shapes:
--   image [1, 1, 28, 28] -> [1, 6, 28, 28] -> [1, 6, 14, 14] -> [1, 16, 10, 10]
--   -> [1, 16, 5, 5] -> [1, 400] -> [1, 120] -> [1, 84] -> logits [1, 10]
-- No trained weights: every parameter comes from the seeded initialiser, so the
-- bytes are the same on every machine. Parameter names ("0.weight", "3.bias", ...)
-- are the state_dict names of the same torch.nn.Sequential.
local kiln = require "kiln"
local nn = require "kiln.nn"

kiln.seed(5)

local image = kiln.input("image", {1, 1, 28, 28})
local model = nn.Sequential {
  nn.Conv2d(1, 6, 5, {padding = 2}), nn.Tanh(), nn.MaxPool2d(2),
  nn.Conv2d(6, 16, 5), nn.Tanh(), nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(400, 120), nn.ReLU(),
  nn.Linear(120, 84), nn.ReLU(),
  nn.Linear(84, 10),
}
kiln.output("logits", model(image))
