-- ints.lua — audit family "integers and logic": i32 arithmetic and comparisons, torch's
-- logical ops (tests/py/run_audit.py compares each target with PyTorch). The Metal
-- harness draws i32 inputs in [0, 4) (--int-max); the constants move them across zero.
local kiln = require "kiln"

local a = kiln.input("a", {3, 5}, "i32")
local b = kiln.input("b", {5}, "i32")
local p = a * 3 - 5                        -- in [-5, 4]
local q = b - 2                            -- in [-2, 1]
kiln.output("i32_add", p + q)
kiln.output("i32_sub", p - q * 7)
kiln.output("i32_mul", p * q)
kiln.output("i32_max", kiln.max(p, q))
kiln.output("i32_min", kiln.min(p, q))
kiln.output("i32_neg_abs", -p + kiln.abs(q))
kiln.output("i32_remainder", kiln.remainder(p, 3))
kiln.output("i32_cmp_lt", p:lt(q))
kiln.output("i32_cmp_ge", p:ge(q))
kiln.output("i32_cmp_eq", p:eq(q))
kiln.output("i32_cmp_ne", p:ne(1))
local m, n = p:gt(0), q:le(0)
kiln.output("logical_and", kiln.logical_and(m, n))
kiln.output("logical_or", kiln.logical_or(m, n))
kiln.output("logical_not", kiln.logical_not(p))
kiln.output("logical_xor", kiln.logical_xor(m, q))
