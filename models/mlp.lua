-- mlp.lua — Kiln's demo model: an MLP 784-512-512-10 classifying Fashion-MNIST.
--
-- Input `image` is one 28x28 greyscale image flattened to [1, 784], pixels scaled
-- to [0, 1] (byte / 255); output `logits` [1, 10] are the class scores (arg-max is
-- the prediction; class names in docs/models.md). The weights were trained by
-- scripts/train_mlp.py with PyTorch on Debian's dataset-fashion-mnist and stored
-- as f16 safetensors; their names ("0.weight", "2.bias", ...) are the state_dict
-- names of the same torch.nn.Sequential, so they load here without renaming.
local kiln = require "kiln"
local nn = require "kiln.nn"

kiln.load("weights/mlp_fashion.safetensors")

local image = kiln.input("image", {1, 784})
local model = nn.Sequential {
  nn.Linear(784, 512), nn.ReLU(),
  nn.Linear(512, 512), nn.ReLU(),
  nn.Linear(512, 10),
}
kiln.output("logits", model(image))
