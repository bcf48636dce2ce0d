-- Rank-0 (scalar) inputs and outputs of every dtype: Core ML exposes each as a
-- multi-array of shape [1] (the same single element); see docs/coreml.md.
local s = kiln.input("s", {})
local k = kiln.input("k", {}, "i32")
local flag = kiln.input("flag", {}, "bool")
local v = kiln.input("v", {4})  -- i32 test inputs are drawn from [0, 4)
kiln.output("dot", v:matmul(v) * s)
kiln.output("picked", kiln.gather(v, k:reshape(1)):reshape({}))
kiln.output("chosen", kiln.where(flag, s, -s))
kiln.output("positive", s:gt(0))
kiln.output("count", kiln.constant(3, nil, "i32"))
kiln.output("s_again", s)
