-- lenet_b64.lua — peer benchmark workload lenet_b64: models/lenet.lua's LeNet-5 at batch 64 (see nets.lua).
require("nets").lenet(64)
