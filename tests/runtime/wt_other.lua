-- wt_other.lua — wt.lua with another seed: same shapes and blob size, other weights.
-- Its weights file must be refused by a program compiled for wt.
kiln.seed(8)
local x = kiln.input("x", {2, 3})
local fc = kiln.nn.Linear(3, 4)
kiln.output("y", kiln.relu(fc(x)))
