-- Rank-0 inputs and outputs (Core ML exposes them as shape [1]).
local s = kiln.input("s", {})
local v = kiln.input("v", {4})
kiln.output("dot", v:matmul(v))
kiln.output("scaled", v * s)
kiln.output("s2", s * s + 1)
kiln.output("total", v:sum())
