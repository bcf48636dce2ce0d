-- tiny.lua — the golden program of the Core ML target (tests/t_coreml.sh): a linear
-- layer (matmul + bias folds into MIL `linear`), relu and softmax. Its decoded
-- model.mlmodel is kept next to it for iOS15/fp32 and iOS17/fp16.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(3)
local x = kiln.input("x", {2, 8})
local fc = nn.name(nn.Linear(8, 16), "fc")
kiln.output("y", kiln.softmax(kiln.relu(fc(x)), -1))
