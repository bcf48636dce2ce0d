-- tm_halfweights.lua — t_models: weights stored as bf16 (weight) and f16 (bias) in the
-- safetensors file, widened to f32 by Kiln; the twin is torch.nn.Linear(16, 8) holding the
-- same rounded values in f32, so only the f32 arithmetic may differ.
local nn = kiln.nn
kiln.load("tm_halfweights.safetensors")
local fc = nn.Linear(16, 8)
local x = kiln.input("x", {3, 16})
kiln.output("y", kiln.sigmoid(fc(x)))
