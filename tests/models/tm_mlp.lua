-- tm_mlp.lua — t_models: an MLP whose twin is torch.nn.Sequential(Linear(32, 64), ReLU(),
-- Linear(64, 48), GELU(), Linear(48, 10), Tanh()). tests/py/run_models.py writes the twin's
-- state_dict beside a copy of this script as tm_mlp.safetensors ("0.weight", "2.bias", ...).
local nn = kiln.nn
kiln.load("tm_mlp.safetensors")
local x = kiln.input("x", {4, 32})
local model = nn.Sequential {
  nn.Linear(32, 64), nn.ReLU(),
  nn.Linear(64, 48), nn.GELU(),
  nn.Linear(48, 10), nn.Tanh(),
}
kiln.output("y", model(x))
