-- rank6_io.lua — must fail for Core ML naming line 4: a model output of rank 6 (the
-- values in between fold to rank 5; a multi-array at the model's boundary does not).
local kiln = require "kiln"
kiln.output("y", kiln.relu(kiln.reshape(kiln.input("x", {2, 3, 4}), {1, 2, 1, 3, 2, 2})))
