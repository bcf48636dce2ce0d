-- tm_gru.lua — t_models: a GRU over a batch-first sequence; the twin is
-- torch.nn.GRU(4, 6, batch_first=True) as `rnn`, returning output and h_n.
local nn = kiln.nn
kiln.load("tm_gru.safetensors")
local Net = nn.Module("Net")
function Net:init() self.rnn = nn.GRU(4, 6, {batch_first = true}) end
function Net:forward(x) return self.rnn(x) end
local out, h = Net()(kiln.input("x", {2, 7, 4}))
kiln.output("out", out)
kiln.output("h_n", h)
