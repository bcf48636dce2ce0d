-- rank6.lua — must fail for Core ML (rank <= 5) naming line 4 (the reshape).
local kiln = require "kiln"
local x = kiln.input("x", {2, 3, 4})
local y = kiln.reshape(x, {1, 2, 1, 3, 2, 2})
kiln.output("y", kiln.relu(y))
