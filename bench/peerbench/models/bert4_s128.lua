-- bert4_s128.lua — peer benchmark workload bert4_s128: four BERT-base encoder layers on
-- 128 token embeddings.
--
-- Each layer is torch.nn.TransformerEncoderLayer(768, 12, 3072, activation="gelu",
-- layer_norm_eps=1e-12, batch_first=True), post-norm, as BERT-base's:
--   x = LayerNorm(x + MultiHeadAttention(x))        12 heads of 64
--   x = LayerNorm(x + Linear(GELU(Linear(x))))      768 -> 3072 -> 768, exact GELU
-- x [1, 128, 768] -> y [1, 128, 768] (hidden states in and out: no embeddings, no pooler).
-- The weights are the PyTorch twin's (workloads.py Bert), under its names
-- ("layers.0.self_attn.in_proj_weight", ...).
local kiln = require "kiln"
local nn = require "kiln.nn"

local D, HEADS, FFN, LAYERS, TOKENS = 768, 12, 3072, 4, 128

kiln.load(require("nets").weights("bert4"), {strict = true})

local Bert = nn.Module("Bert")
function Bert:init()
  self.layers = {}
  for i = 1, LAYERS do
    self.layers[i] = nn.TransformerEncoderLayer(D, HEADS, FFN, {activation = "gelu", eps = 1e-12})
  end
end
function Bert:forward(x)
  for _, layer in ipairs(self.layers) do x = layer(x) end
  return x
end

local x = kiln.input("x", {1, TOKENS, D})
kiln.output("y", Bert()(x))
