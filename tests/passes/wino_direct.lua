-- wino.lua built with --no-winograd (wino_direct.args): both convolutions keep the
-- direct product over filters packed in blocks of 12 (panels12^T), and the 3x3 one
-- gets the padded copy of its input as scratch instead of its tiles' transforms.
local kiln = require "kiln"
kiln.seed(1)
local x = kiln.input("img", {1, 16, 8, 8})
local w3 = kiln.param("w3", {16, 16, 3, 3}, {"normal", 0, 0.1})
local w2 = kiln.param("w2", {12, 16, 2, 2}, {"normal", 0, 0.1})
kiln.output("y", kiln.relu(kiln.conv2d(x, w3, {padding = 1})))
kiln.output("z", kiln.conv2d(x, w2))
