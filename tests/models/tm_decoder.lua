-- tm_decoder.lua — t_models: torch.nn.TransformerDecoderLayer, post-norm with a causal
-- target mask (`post`: d 16, 2 heads, feed-forward 32, relu) then pre-norm (`pre`: 4
-- heads, feed-forward 24, gelu), both over the same memory.
local nn = kiln.nn
kiln.load("tm_decoder.safetensors")
local Net = nn.Module("Net")
function Net:init()
  self.post = nn.TransformerDecoderLayer(16, 2, 32)
  self.pre = nn.TransformerDecoderLayer(16, 4, 24, {activation = "gelu", norm_first = true})
end
function Net:forward(tgt, mem, causal) return self.pre(self.post(tgt, mem, causal), mem) end
kiln.output("y", Net()(kiln.input("tgt", {2, 5, 16}), kiln.input("mem", {2, 7, 16}), kiln.input("causal", {5, 5}, "bool")))
