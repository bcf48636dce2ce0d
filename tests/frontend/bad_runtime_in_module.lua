-- expect: tests/frontend/bad_runtime_in_module.lua:7: error: attempt to index a nil value (field 'missing')
local kiln = require "kiln"
local nn = require "kiln.nn"
local Block = nn.Module("Block")
function Block:init() self.fc = nn.Linear(4, 4) end
function Block:forward(x)
  return self.fc(x) + self.missing.weight
end
local model = Block()
kiln.output("y", model(kiln.input("x", {1, 4})))
