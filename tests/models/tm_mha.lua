-- tm_mha.lua — t_models: multi-head attention, self and cross; the twin holds
-- torch.nn.MultiheadAttention(24, 3, batch_first=True) as `self_attn` and
-- MultiheadAttention(24, 2, bias=False, batch_first=True) as `cross_attn` and returns
-- their first results (the attention output, not the weights).
local nn = kiln.nn
kiln.load("tm_mha.safetensors")
local Attn = nn.Module("Attn")
function Attn:init()
  self.self_attn = nn.MultiHeadAttention(24, 3)
  self.cross_attn = nn.MultiHeadAttention(24, 2, {bias = false})
end
function Attn:forward(q, mem)
  local h = self.self_attn(q)
  return h, self.cross_attn(h, mem, mem)
end
local q = kiln.input("q", {2, 5, 24})
local mem = kiln.input("mem", {2, 9, 24})
local h, c = Attn()(q, mem)
kiln.output("self_out", h)
kiln.output("cross_out", c)
