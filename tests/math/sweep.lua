-- sweep.lua — the model of t_math: every op whose C kernel calls Kiln's own math functions
-- (templates/c/math_*.c.tmpl), each on the same 2^18 inputs (tests/py/math_sweep.py picks
-- them: special values, the neighbourhoods of every threshold the functions branch on,
-- random bit patterns over the whole float range, and dense values where models live).
local n = 262144
local x = kiln.input("x", {n})
kiln.output("exp", kiln.exp(x))
kiln.output("tanh", kiln.tanh(x))
kiln.output("erf", kiln.erf(x))
kiln.output("log", kiln.log(x))
kiln.output("sigmoid", kiln.sigmoid(x))
kiln.output("silu", kiln.silu(x))
kiln.output("gelu", kiln.gelu(x))
kiln.output("gelu_tanh", kiln.gelu(x, "tanh"))
