-- A strict load of a PyTorch state_dict that holds BatchNorm's training counter
-- (bn.num_batches_tracked, I64) and no parameter asks for it: PyTorch's strict
-- load_state_dict accepts that, and so does Kiln (the counter is never used).
kiln.load("strict_counter.safetensors", {strict = true})
kiln.output("y", kiln.input("x", {4}) * kiln.param("w", {4}))
