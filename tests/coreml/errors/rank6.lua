-- rank6.lua — must fail for Core ML naming line 4: a reduction over dims that a rank-6
-- value folds together (Core ML's ops stop at rank 5; only elementwise ops and reshapes fold).
local kiln = require "kiln"
local y = kiln.reshape(kiln.input("x", {2, 3, 4}), {1, 2, 1, 3, 2, 2}):sum(1)
kiln.output("y", kiln.relu(y):reshape(3, 4))
