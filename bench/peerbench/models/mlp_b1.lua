-- mlp_b1.lua — peer benchmark workload mlp_b1: models/mlp.lua's MLP at batch 1 (see nets.lua).
require("nets").mlp(1)
