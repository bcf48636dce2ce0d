-- mtl_i64.lua — Metal test model: i64 inputs (token ids as PyTorch exports them). The
-- host narrows each to i32 after checking every value fits (kiln_mtl_check_i64, as the
-- C entry does); the kernels read i32: an embedding gathered by 2-D ids, and i32
-- arithmetic on a second i64 input next to an f32 one. tests/metal/i64_range.py runs it
-- on the int32 limits and out of range.
local kiln = require "kiln"
local nn = require "kiln.nn"
local ids = kiln.input("ids", {2, 3}, "i64")
local k = kiln.input("k", {5}, "i64")
local x = kiln.input("x", {2, 3, 4})
local emb = nn.Embedding(10, 4)
kiln.output("rows", emb(ids) + x)
kiln.output("k2", k * 3 - 1)
kiln.output("kf", k:cast("f32") * 0.5)
