-- tm_resblock.lua — t_models: a ResNet basic block with a strided 1x1 projection shortcut,
-- written as an nn.Module of our own; the twin is a torch.nn.Module with the same field
-- names, so the state_dict names match ("conv1.weight", "down.0.weight", "down.1.running_mean").
local nn = kiln.nn
kiln.load("tm_resblock.safetensors")
local Block = nn.Module("Block")
function Block:init(cin, cout)
  self.conv1 = nn.Conv2d(cin, cout, 3, {stride = 2, padding = 1, bias = false})
  self.bn1 = nn.BatchNorm2d(cout)
  self.conv2 = nn.Conv2d(cout, cout, 3, {padding = 1, bias = false})
  self.bn2 = nn.BatchNorm2d(cout)
  self.down = nn.Sequential {nn.Conv2d(cin, cout, 1, {stride = 2, bias = false}), nn.BatchNorm2d(cout)}
end
function Block:forward(x)
  local h = kiln.relu(self.bn1(self.conv1(x)))
  h = self.bn2(self.conv2(h))
  return kiln.relu(h + self.down(x))
end
local x = kiln.input("x", {1, 8, 10, 10})
kiln.output("y", Block(8, 16)(x))
