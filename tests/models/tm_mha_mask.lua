-- tm_mha_mask.lua — t_models: attention masks. The twin is torch.nn.MultiheadAttention(16, 2,
-- batch_first=True) called twice: with a bool causal attn_mask plus a bool key_padding_mask
-- (true = may not attend), and with an additive float attn_mask.
local nn = kiln.nn
kiln.load("tm_mha_mask.safetensors")
local Masked = nn.Module("Masked")
function Masked:init() self.attn = nn.MultiHeadAttention(16, 2) end
function Masked:forward(x, causal, pad, bias)
  return self.attn(x, x, x, causal, pad), self.attn(x, x, x, bias)
end
local x = kiln.input("x", {2, 6, 16})
local causal = kiln.input("causal", {6, 6}, "bool")
local pad = kiln.input("pad", {2, 6}, "bool")
local bias = kiln.input("bias", {6, 6})
local a, b = Masked()(x, causal, pad, bias)
kiln.output("masked", a)
kiln.output("biased", b)
