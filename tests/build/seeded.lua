-- seeded.lua — a 33.6M-parameter stack of seeded linear layers (128 MiB of f32 weights, no
-- file needed): t_build measures the compiler's peak memory on it.
local kiln = require "kiln"
local nn = require "kiln.nn"

local D, LAYERS = 2048, 8
local layers = {}
for i = 1, LAYERS do layers[i] = nn.Linear(D, D, {bias = false}) end
kiln.output("y", nn.Sequential(layers)(kiln.input("x", {1, D})))
