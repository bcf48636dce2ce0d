-- init.lua — parameters from the deterministic initialiser; t_frontend.sh compares
-- their bits with init_ref.py.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.output("u0", kiln.param("u0", {37}, {"uniform", -1, 1}))
kiln.output("n0", kiln.param("n0", {41}, {"normal", 0, 1}))
kiln.seed(7)
kiln.output("u7", kiln.param("layers.0.attn.q.weight", {3, 5}, {"uniform", -0.25, 0.5}))
kiln.output("n7", kiln.param("emb", {4, 4}, {"normal", 1.5, 0.02}))
kiln.output("c7", kiln.param("c", {3}, {"const", 0.1}))
kiln.seed(-1)
kiln.output("nneg", kiln.param("n1", {64}))
local fc = nn.Linear(100, 3)
kiln.output("y", fc(kiln.input("x", {1, 100})))
kiln.output("fcw", fc._params.weight)
kiln.output("fcb", fc._params.bias)
