-- tm_encoder.lua — t_models: two transformer encoder layers; the twin is
-- torch.nn.Sequential(TransformerEncoderLayer(32, 4, 64, dropout=0, activation="gelu",
-- batch_first=True), TransformerEncoderLayer(32, 4, 64, dropout=0, activation="relu",
-- batch_first=True, norm_first=True, layer_norm_eps=1e-6)) in eval mode.
local nn = kiln.nn
kiln.load("tm_encoder.safetensors")
local x = kiln.input("x", {2, 7, 32})
local model = nn.Sequential {
  nn.TransformerEncoderLayer(32, 4, 64, {activation = "gelu"}),
  nn.TransformerEncoderLayer(32, 4, 64, {activation = "relu", norm_first = true, eps = 1e-6}),
}
kiln.output("y", model(x))
