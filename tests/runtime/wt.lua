-- wt.lua — the model of t_runtime: a linear layer with a bias and a ReLU, seeded weights.
-- t_runtime builds it, then feeds the runtime good and damaged copies of wt.weights.
kiln.seed(7)
local x = kiln.input("x", {2, 3})
local fc = kiln.nn.Linear(3, 4)
kiln.output("y", kiln.relu(fc(x)))
