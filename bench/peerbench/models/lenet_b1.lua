-- lenet_b1.lua — peer benchmark workload lenet_b1: models/lenet.lua's LeNet-5 at batch 1 (see nets.lua).
require("nets").lenet(1)
