-- transformer.lua — a BERT-style transformer encoder: two post-norm layers.
--
-- Each layer is torch.nn.TransformerEncoderLayer(64, 4, 256, activation="gelu",
-- batch_first=True, norm_first=False), i.e. BERT's block:
--   x = LayerNorm(x + MultiHeadAttention(x, x, x))      4 heads of 16
--   x = LayerNorm(x + Linear(GELU(Linear(x))))          64 -> 256 -> 64, exact GELU
-- Input `x` [1, 16, 64] are 16 token embeddings of width 64 (batch-first); output
-- `y` [1, 16, 64]. No trained weights: every parameter comes from the seeded
-- initialiser. Parameter names are those of torch.nn.TransformerEncoder
-- ("layers.0.self_attn.in_proj_weight", ...), so a PyTorch twin loads them as is.
local kiln = require "kiln"
local nn = require "kiln.nn"

kiln.seed(11)

local D, HEADS, FF, LAYERS, TOKENS = 64, 4, 256, 2, 16

local Encoder = nn.Module("Encoder")
function Encoder:init()
  local layers = {}
  for i = 1, LAYERS do
    layers[i] = nn.TransformerEncoderLayer(D, HEADS, FF, {activation = "gelu"})
  end
  self.layers = nn.Sequential(layers)
end
function Encoder:forward(x) return self.layers(x) end

local x = kiln.input("x", {1, TOKENS, D})
kiln.output("y", Encoder()(x))
