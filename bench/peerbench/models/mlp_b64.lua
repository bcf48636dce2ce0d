-- mlp_b64.lua — peer benchmark workload mlp_b64: models/mlp.lua's MLP at batch 64 (see nets.lua).
require("nets").mlp(64)
