-- mtl_elem.lua — Metal test model: every elementwise family (unary, binary with
-- broadcasting, comparisons, where, cast, copy) on odd shapes, float4 and scalar paths.
local kiln = require "kiln"
local a = kiln.input("a", {3, 5, 7})
local b = kiln.input("b", {5, 1})
local c = kiln.input("c", {4, 8})            -- 32 elements: the float4 path
local ids = kiln.input("ids", {6}, "i32")
local s = a * b + kiln.exp(a) - kiln.abs(b) / (kiln.sqrt(kiln.abs(a)) + 1)
local t = kiln.max(kiln.tanh(s), kiln.sigmoid(a)) + kiln.min(kiln.relu(s), 0.5) + kiln.silu(a)
local u = kiln.gelu(t) + kiln.gelu(t, {approximate = "tanh"}) + kiln.rsqrt(kiln.abs(t) + 1) + kiln.log(kiln.abs(s) + 1)
local p = kiln.pow(kiln.abs(u) + 0.5, b) + (-u) ^ 2
kiln.output("p", p)
local cmp = kiln.gt(a, b)
kiln.output("w", kiln.where(cmp, a, kiln.neg(b)))
kiln.output("cmp", kiln.le(a, 0.25))
kiln.output("cv", kiln.relu(c) * 2 + kiln.exp(c))
kiln.output("ci", kiln.cast(kiln.cast(a * 10, "i32"), "f32") + kiln.cast(ids, "f32"):sum())
kiln.output("eqne", kiln.cast(kiln.eq(c, c), "f32") + kiln.cast(kiln.ne(c, 0.5), "f32") + kiln.cast(kiln.ge(c, 0), "f32") + kiln.cast(kiln.lt(c, 0), "f32"))
kiln.output("ids2", ids)
