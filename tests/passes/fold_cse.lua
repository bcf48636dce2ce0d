-- Constant folding, CSE and DCE through the Lua frontend: `k` is computed at build
-- time, the two equal adds merge, `unused` stays an input, `dead` disappears.
local kiln = require "kiln"
local x = kiln.input("x", {2, 3})
kiln.input("unused", {4})
local c = kiln.constant({1, 2, 3}, {3})
local k = (c * 2 + 1):exp()
local a = x + k
local b = x + k
local dead = x:tanh()
local p = a * b
kiln.output("y", kiln.relu(p))
kiln.output("v", p:reshape({3, 2}))
kiln.output("same", x)
