-- Modules named like the helpers the C target writes for another kernel ("fc" and
-- "fc_store", a softmax's "_rows", a pool's "_row" and "_window", a convolution's "_planes"):
-- every kernel must still get names of its own, and the C compile and agree with the
-- interpreter. (Products of one term plus a bias: the comparison is to a few ulp, which
-- longer sums can miss.)
local nn = kiln.nn
local x = kiln.input("x", {16, 1})
local fc = nn.name(nn.Linear(1, 4), "fc")
local fc_store = nn.name(nn.Linear(1, 4), "fc_store")
local fc_args = nn.name(nn.Linear(1, 4), "fc_args")
local softmax_rows = nn.name(nn.Linear(1, 4), "softmax_rows")   -- the softmax below is "softmax"
kiln.output("h", kiln.relu(fc(x)))
kiln.output("s", kiln.relu(fc_store(x)))
kiln.output("a", kiln.relu(fc_args(x)))
kiln.output("n", kiln.softmax(kiln.input("v", {16, 4}), -1))
kiln.output("r", kiln.relu(softmax_rows(x)))
local img = kiln.input("img", {1, 1, 8, 8})
local conv = nn.name(nn.Conv2d(1, 4, 1, {bias = false}), "conv")
local conv_row = nn.name(nn.Conv2d(1, 4, 1, {bias = false}), "maxpool2d_row")        -- the pool below is "maxpool2d"
local conv_window = nn.name(nn.Conv2d(1, 4, 1, {bias = false}), "maxpool2d_window")
kiln.output("p", kiln.maxpool2d(kiln.relu(conv(img)), 2))
kiln.output("q", kiln.relu(conv_row(img)))
kiln.output("w", kiln.relu(conv_window(img)))
local big = nn.name(nn.Conv2d(1, 16, 1, {bias = false}), "big")   -- its store (the relu): "big_planes"
local big_planes = nn.name(nn.Conv2d(1, 16, 1, {bias = false}), "big_planes")
local feat = kiln.input("feat", {1, 1, 32, 32})
kiln.output("c", kiln.relu(big(feat)))
kiln.output("d", kiln.relu(big_planes(feat)))
