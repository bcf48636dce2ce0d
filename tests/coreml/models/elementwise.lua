-- elementwise.lua — Core ML op coverage: every elementwise op, comparisons and
-- where, casts, and i32/bool model inputs and outputs (which travel as INT32).
local kiln = require "kiln"

local x = kiln.input("x", {2, 3, 4})
local y = kiln.input("y", {3, 4})
local mask = kiln.input("mask", {2, 3, 4}, "bool")
local n = kiln.input("n", {2, 3, 4}, "i32")

local p = kiln.pow(kiln.abs(x) + 0.5, kiln.sigmoid(y))
local mm = kiln.max(x, y) - kiln.min(x, y) * 2
local e = kiln.exp(kiln.neg(kiln.abs(x))) + kiln.log(kiln.abs(y) + 1)
local r = kiln.sqrt(kiln.abs(x) + 1) * kiln.rsqrt(kiln.abs(y) + 1) / (kiln.tanh(x) + 2)
local g = kiln.gelu(x) + kiln.gelu(y, {approximate = "tanh"}) + kiln.silu(x) + kiln.relu(y)
local cmp = kiln.where(kiln.gt(x, y), p, mm) + kiln.where(kiln.le(x, 0), e, r)
local both = kiln.where(mask, cmp, g) + kiln.cast(n, "f32")
kiln.output("out", both)
kiln.output("lt", kiln.lt(x, y))
kiln.output("eqs", kiln.cast(kiln.eq(kiln.cast(kiln.cast(x, "i32"), "f32"), 0), "i32"))
kiln.output("flags", kiln.where(mask, kiln.ne(x, y), kiln.ge(x, y)))
