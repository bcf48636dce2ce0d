-- modules.lua — audit family "modules": the recurrent layers and the Transformer decoder
-- layer of issue 12, seeded by Kiln; tests/py/run_audit.py loads the build's weights into
-- torch.nn.LSTM / GRU / TransformerDecoderLayer by their state_dict names.
local kiln = require "kiln"
local nn = require "kiln.nn"
kiln.seed(5)

local s = kiln.input("s", {4, 2, 5})            -- [T, B, in] (batch_first = false)
local lstm = nn.name(nn.LSTM(5, 6, {num_layers = 2}), "lstm")
local out, h, c = lstm(s)
kiln.output("nn_LSTM", out)
kiln.output("nn_LSTM_state", h + c)
local gru = nn.name(nn.GRU(5, 4, {batch_first = true, bidirectional = true}), "gru")
local gout, gh = gru(s)
kiln.output("nn_GRU", gout)
kiln.output("nn_GRU_state", gh)
local tgt = kiln.input("tgt", {2, 3, 8})
local mem = kiln.input("mem", {2, 4, 8})
local dec = nn.name(nn.TransformerDecoderLayer(8, 2, 16, {batch_first = true}), "dec")
kiln.output("nn_TransformerDecoderLayer", dec(tgt, mem))
