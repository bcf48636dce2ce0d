-- A two-layer MLP: kernel names from the nn paths, weights in node order,
-- intermediates sharing the arena, the last add writing into the output.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(3)
local x = kiln.input("image", {1, 16})
local model = nn.Sequential { nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 4) }
kiln.output("logits", model(x))
