-- pass_pool_act and the packed filters of pass_pack. A max pool of a tanh (and of a
-- sigmoid) becomes the tanh (sigmoid) of the max pool; a tanh that something else also
-- reads, or a relu, stays where it is. Conv filters that are parameters, 8 or more a group,
-- are stored in blocks of 12 (panels12^T); fewer (depthwise here) stay as they are.
local kiln = require "kiln"
local nn = require "kiln.nn"
local x = kiln.input("img", {2, 3, 12, 12})
local c1 = nn.name(nn.Conv2d(3, 14, 3, {padding = 1}), "c1")
local c2 = nn.name(nn.Conv2d(14, 14, 3, {padding = 1, groups = 14}), "c2")
local t = kiln.tanh(c1(x))
local a = kiln.maxpool2d(t, {kernel = 2, stride = 2})                       -- swapped
local b = kiln.maxpool2d(kiln.sigmoid(c2(a)), {kernel = 3, stride = 1, padding = 1})   -- swapped
local kept = kiln.tanh(b)
local c = kiln.maxpool2d(kept, {kernel = 2, stride = 2}) + kiln.maxpool2d(kiln.relu(b), {kernel = 2, stride = 2})
kiln.output("y", c + kiln.mean(kept, {2, 3}, {keepdim = true}))
