-- tinyconv.lua — the golden model of a convolution block: a 3x3 convolution that runs by
-- Winograd's F(2x2, 3x3) (filters transformed at build time, its input transformed into
-- arena scratch), its BatchNorm, the residual add and the relu fused into its store; then
-- a strided convolution over the padded grid. Weights from the seeded initialiser.
local nn = kiln.nn
kiln.seed(5)

local Block = nn.Module("Block")
function Block:init(c)
  self.conv = nn.Conv2d(c, c, 3, {padding = 1, bias = false})
  self.bn = nn.BatchNorm2d(c)
  self.down = nn.Conv2d(c, 2 * c, 3, {stride = 2, padding = 1})
end
function Block:forward(x)
  local y = kiln.relu(kiln.add(self.bn(self.conv(x)), x))
  return self.down(y)
end

local image = kiln.input("image", {1, 16, 8, 8})
kiln.output("features", Block(16)(image))   -- [1, 32, 4, 4]
