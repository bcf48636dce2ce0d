-- expect: tests/frontend/bad_custom_module.lua:9: error: matmul: inner dims differ: [1, 8] @ [4, 4]
local kiln = require "kiln"
local nn = require "kiln.nn"
local Block = nn.Module("Block")
function Block:init() self.fc = nn.Linear(8, 8) end
function Block:forward(x)
  local h = self.fc(x)
  local w = kiln.constant(0, {4, 4})
  return kiln.matmul(h, w)
end
local x = kiln.input("x", {1, 8})
kiln.output("y", Block()(x))
