-- tm_norms.lua — t_models: Embedding -> LayerNorm -> RMSNorm; the twin has torch.nn.Embedding
-- `emb`, torch.nn.LayerNorm `ln` and a hand-written RMSNorm `rms` (torch 1.13 has none):
-- x * rsqrt(mean(x^2, -1) + eps) * weight.
local nn = kiln.nn
kiln.load("tm_norms.safetensors")
local Net = nn.Module("Net")
function Net:init()
  self.emb = nn.Embedding(50, 48)
  self.ln = nn.LayerNorm(48)
  self.rms = nn.RMSNorm(48, {eps = 1e-6})
end
function Net:forward(ids)
  local h = self.ln(self.emb(ids))
  return h, self.rms(h * 3 + 1)
end
local ids = kiln.input("ids", {2, 7}, "i32")
local h, r = Net()(ids)
kiln.output("h", h)
kiln.output("r", r)
