-- tm_lstm.lua — t_models: a 2-layer bidirectional LSTM; the twin is
-- torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True) as `rnn`, returning output, h_n, c_n.
local nn = kiln.nn
kiln.load("tm_lstm.safetensors")
local Net = nn.Module("Net")
function Net:init() self.rnn = nn.LSTM(3, 5, {num_layers = 2, bidirectional = true}) end
function Net:forward(x) return self.rnn(x) end
local out, h, c = Net()(kiln.input("x", {6, 2, 3}))
kiln.output("out", out)
kiln.output("h_n", h)
kiln.output("c_n", c)
