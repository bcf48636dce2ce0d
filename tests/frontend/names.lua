-- names.lua — nn naming: sorted children, plain arrays of modules, a child created
-- lazily inside forward, nn.name prefixes, Module:param, scopes restored after a
-- pcall'd error. The asserts check tensor names; t_frontend.sh checks the weight
-- names and their order in `kiln graph`.
local kiln = require "kiln"
local nn = require "kiln.nn"

local Block = nn.Module("Block")
function Block:init(d)
  self.norm = nn.LayerNorm(d)
  self.fc = nn.Linear(d, d)
  self.layers = {nn.Linear(d, d), nn.Linear(d, d, {bias = false})}
end
function Block:forward(x)
  if not self.late then self.late = nn.Linear(4, 4) end
  local scale = self:param("scale", {4}, {"ones"})
  local h = self.fc(self.norm(x)) * scale
  assert(h.name == "enc", tostring(h.name))
  for _, l in ipairs(self.layers) do h = l(h) end
  assert(h.name == "enc.layers.1", tostring(h.name))
  return self.late(h)
end

local x = kiln.input("x", {1, 4})
local model = nn.name(Block(4), "enc")
local y = model(x)
assert(y.name == "enc.late", tostring(y.name))

local bad = nn.name(nn.Sequential {nn.Linear(3, 3)}, "bad")
local ok, msg = pcall(bad, x)
assert(not ok and msg:find("linear: input [1, 4] has 4 features", 1, true), msg)
local z = y * 3
assert(z.name == nil, tostring(z.name))
assert(tostring(model) == "nn.Block 'enc'", tostring(model))
kiln.output("y", z)
