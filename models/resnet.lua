-- resnet.lua — a small ResNet: a stem and three basic blocks on a 3x32x32 image.
--
-- A basic block is conv3x3 -> BatchNorm2d -> ReLU -> conv3x3 -> BatchNorm2d, plus
-- the block's input (the residual), then ReLU. The third block halves the
-- resolution with stride 2 and doubles the channels, so its residual goes through
-- a 1x1 projection conv + BatchNorm2d (torchvision's `downsample`). Shapes:
--   image [1, 3, 32, 32] -> stem [1, 16, 32, 32] -> layer1 [1, 16, 32, 32]
--   -> layer2 [1, 16, 32, 32] -> layer3 [1, 32, 16, 16]
--   -> global average pool (mean over H, W) [1, 32] -> fc -> logits [1, 10]
-- BatchNorm is inference-mode (running statistics). No trained weights: every
-- parameter comes from the seeded initialiser. nn.BatchNorm2d starts as PyTorch's
-- does (mean 0, var 1, weight 1, bias 0), which makes it nearly the identity and
-- would hide a mixed-up statistic, so the BatchNorm module below is nn.BatchNorm2d
-- with statistics drawn like a trained network's (and an example of self:param).
-- Parameter names follow torchvision (conv1, bn1, conv2, bn2, downsample.0/1,
-- weight/bias/running_mean/running_var), so a PyTorch twin loads the same names.
local kiln = require "kiln"
local nn = require "kiln.nn"

kiln.seed(7)

-- Inference BatchNorm2d over channels, with non-trivial "trained" statistics.
local BatchNorm = nn.Module("BatchNorm")
function BatchNorm:init(c) self.c = c end
function BatchNorm:forward(x)
  local c = self.c
  local mean = self:param("running_mean", {c}, {"uniform", -0.5, 0.5})
  local var = self:param("running_var", {c}, {"uniform", 0.5, 2.0})
  local w = self:param("weight", {c}, {"uniform", 0.5, 1.5})
  local b = self:param("bias", {c}, {"uniform", -0.2, 0.2})
  return kiln.batchnorm(x, mean, var, w, b, {eps = 1e-5})
end

-- conv3x3 -> BN -> ReLU -> conv3x3 -> BN, + (projected) input, -> ReLU.
local BasicBlock = nn.Module("BasicBlock")
function BasicBlock:init(cin, cout, stride)
  self.conv1 = nn.Conv2d(cin, cout, 3, {stride = stride, padding = 1, bias = false})
  self.bn1 = BatchNorm(cout)
  self.conv2 = nn.Conv2d(cout, cout, 3, {padding = 1, bias = false})
  self.bn2 = BatchNorm(cout)
  if stride ~= 1 or cin ~= cout then
    self.downsample = nn.Sequential {
      nn.Conv2d(cin, cout, 1, {stride = stride, bias = false}),
      BatchNorm(cout),
    }
  end
end
function BasicBlock:forward(x)
  local y = kiln.relu(self.bn1(self.conv1(x)))
  y = self.bn2(self.conv2(y))
  local skip = self.downsample and self.downsample(x) or x
  return kiln.relu(y + skip)
end

local ResNet = nn.Module("ResNet")
function ResNet:init()
  self.conv1 = nn.Conv2d(3, 16, 3, {padding = 1, bias = false})
  self.bn1 = BatchNorm(16)
  self.layer1 = BasicBlock(16, 16, 1)
  self.layer2 = BasicBlock(16, 16, 1)
  self.layer3 = BasicBlock(16, 32, 2)
  self.fc = nn.Linear(32, 10)
end
function ResNet:forward(x)
  x = kiln.relu(self.bn1(self.conv1(x)))
  x = self.layer3(self.layer2(self.layer1(x)))
  return self.fc(kiln.mean(x, {2, 3}))     -- global average pool: [1, 32, 16, 16] -> [1, 32]
end

local image = kiln.input("image", {1, 3, 32, 32})
kiln.output("logits", ResNet()(image))
