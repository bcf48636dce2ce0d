-- resnet18_b1.lua — peer benchmark workload resnet18_b1: torchvision's ResNet-18 on one
-- 3x224x224 image, 1000 classes.
--
-- stem: conv 7x7/2 (64) -> BatchNorm -> ReLU -> maxpool 3x3/2 (padding 1), then four
-- stages of two basic blocks (64, 128, 256, 512 channels; the first block of stages 2-4
-- halves the resolution and projects its residual with a 1x1/2 conv + BatchNorm), global
-- average pool, fc 512 -> 1000. Shapes: [1, 3, 224, 224] -> [1, 64, 112, 112] ->
-- [1, 64, 56, 56] -> [1, 128, 28, 28] -> [1, 256, 14, 14] -> [1, 512, 7, 7] -> [1, 1000].
-- BatchNorm in inference mode. The weights and statistics are the PyTorch twin's
-- (workloads.py ResNet18), under torchvision's names (layer2.0.downsample.1.running_var).
local kiln = require "kiln"
local nn = require "kiln.nn"

kiln.load(require("nets").weights("resnet18"), {strict = true})

-- conv3x3 -> BN -> ReLU -> conv3x3 -> BN, + the (projected) input, -> ReLU.
local BasicBlock = nn.Module("BasicBlock")
function BasicBlock:init(cin, cout, stride)
  self.conv1 = nn.Conv2d(cin, cout, 3, {stride = stride, padding = 1, bias = false})
  self.bn1 = nn.BatchNorm2d(cout)
  self.conv2 = nn.Conv2d(cout, cout, 3, {padding = 1, bias = false})
  self.bn2 = nn.BatchNorm2d(cout)
  if stride ~= 1 or cin ~= cout then
    self.downsample = nn.Sequential {
      nn.Conv2d(cin, cout, 1, {stride = stride, bias = false}),
      nn.BatchNorm2d(cout),
    }
  end
end
function BasicBlock:forward(x)
  local y = kiln.relu(self.bn1(self.conv1(x)))
  y = self.bn2(self.conv2(y))
  local skip = self.downsample and self.downsample(x) or x
  return kiln.relu(y + skip)
end

local ResNet18 = nn.Module("ResNet18")
function ResNet18:init()
  self.conv1 = nn.Conv2d(3, 64, 7, {stride = 2, padding = 3, bias = false})
  self.bn1 = nn.BatchNorm2d(64)
  local cin = 64
  for i, stage in ipairs {{64, 1}, {128, 2}, {256, 2}, {512, 2}} do
    local cout, stride = stage[1], stage[2]
    self["layer" .. i] = nn.Sequential {BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)}
    cin = cout
  end
  self.fc = nn.Linear(512, 1000)
end
function ResNet18:forward(x)
  x = kiln.maxpool2d(kiln.relu(self.bn1(self.conv1(x))), {kernel = 3, stride = 2, padding = 1})
  x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
  local y = self.fc(kiln.mean(x, {2, 3}))     -- global average pool: [1, 512, 7, 7] -> [1, 512]
  return y
end

local x = kiln.input("x", {1, 3, 224, 224})
kiln.output("y", ResNet18()(x))
