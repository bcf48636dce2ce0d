-- habits.lua — audit family "habits": PyTorch habits of issue 12. A strict load of a
-- state_dict holding BatchNorm's num_batches_tracked (written by tests/py/run_audit.py
-- from a torch twin), a module's parameter reached as a field for weight tying, plain
-- functions in nn.Sequential, Lua booleans in kiln.constant, torch.gather's argument
-- order in kiln.gather.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.load("habits.safetensors", {strict = true})

local Net = nn.Module("Net")
function Net:init()
  self.wte = nn.Embedding(10, 8)
  self.bn = nn.BatchNorm1d(8)
  self.seq = nn.Sequential {kiln.relu, nn.Linear(8, 8), kiln.tanh}
end
function Net:forward(ids, x)
  local h = self.wte(ids) + self.seq(self.bn(x))
  return kiln.linear(h, self.wte.weight)        -- tied to the embedding
end
local ids = kiln.input("ids", {5}, "i32")
local x = kiln.input("x", {5, 8})
local net = Net()
kiln.output("tied_and_sequential", net(ids, x))
kiln.output("bool_constant", kiln.where(kiln.constant({true, false, false, true, true, false, true, false}), x, -x))
local idx = kiln.input("idx", {5, 3}, "i32")
kiln.output("gather_torch_order", kiln.gather(x, 1, idx))
