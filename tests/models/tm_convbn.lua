-- tm_convbn.lua — t_models: a conv/batchnorm stack; its twin is the torch.nn.Sequential of
-- the same modules in eval mode (running statistics drawn at random, so batchnorm is not
-- the identity). Exercises stride, padding, groups, dilation, no-bias conv, both pools.
local nn = kiln.nn
kiln.load("tm_convbn.safetensors")
local x = kiln.input("x", {2, 3, 16, 16})
local model = nn.Sequential {
  nn.Conv2d(3, 8, 3, {padding = 1}), nn.BatchNorm2d(8), nn.ReLU(),                 -- 0 1 2
  nn.Conv2d(8, 16, 3, {stride = 2, padding = 1, groups = 2}), nn.BatchNorm2d(16),  -- 3 4
  nn.ReLU(), nn.MaxPool2d(2),                                                      -- 5 6
  nn.Conv2d(16, 16, 3, {padding = 2, dilation = 2, bias = false}), nn.SiLU(),      -- 7 8
  nn.AvgPool2d(2), nn.Flatten(), nn.Linear(64, 10),                                -- 9 10 11
}
kiln.output("logits", model(x))
