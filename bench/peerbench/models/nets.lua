-- nets.lua — the MLP and LeNet of models/mlp.lua and models/lenet.lua at any batch size,
-- for the peer benchmark's workloads (mlp_b1.lua, mlp_b64.lua, lenet_b1.lua, lenet_b64.lua).
--
-- The weights are the PyTorch twin's (bench/peerbench/workloads.py), written by
-- prepare.py under .cache/bench/weights/ with the twin's state_dict names ("0.weight",
-- "2.bias", ...), loaded strictly: every tensor of the file is used, every parameter
-- comes from the file.
local kiln = require "kiln"
local nn = require "kiln.nn"

local nets = {}

-- The path of the peer benchmark's weights set `name`: under $KILN_BENCH_CACHE when set
-- (tests/t_bench.sh builds in a temporary directory), else under the repository's
-- .cache/bench, given relative to this directory.
function nets.weights(name)
  local dir = os.getenv("KILN_BENCH_CACHE") or "../../../.cache/bench"
  return dir .. "/weights/" .. name .. ".safetensors"
end

-- models/mlp.lua's 784-512-512-10 ReLU MLP on x [batch, 784] -> y [batch, 10].
function nets.mlp(batch)
  kiln.load(nets.weights("mlp"), {strict = true})
  local x = kiln.input("x", {batch, 784})
  local model = nn.Sequential {
    nn.Linear(784, 512), nn.ReLU(),
    nn.Linear(512, 512), nn.ReLU(),
    nn.Linear(512, 10),
  }
  kiln.output("y", model(x))
end

-- models/lenet.lua's LeNet-5 on x [batch, 1, 28, 28] -> y [batch, 10].
function nets.lenet(batch)
  kiln.load(nets.weights("lenet"), {strict = true})
  local x = kiln.input("x", {batch, 1, 28, 28})
  local model = nn.Sequential {
    nn.Conv2d(1, 6, 5, {padding = 2}), nn.Tanh(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.Tanh(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(400, 120), nn.ReLU(),
    nn.Linear(120, 84), nn.ReLU(),
    nn.Linear(84, 10),
  }
  kiln.output("y", model(x))
end

return nets
