-- i64.lua — i64 inputs on Core ML: the package declares `ids` int32 (Core ML has no int64
-- multi-array) and its one reader, the cast to i32, is an identity. compare.py draws the
-- int32 limits into it (INT32_MAX, INT32_MIN first), so `same` checks them bit for bit.
local kiln = require "kiln"

local ids = kiln.input("ids", {2, 3}, "i64")
local x = kiln.input("x", {2, 3}, "f32")
local v = ids:cast("i32")
kiln.output("same", v)
kiln.output("big", v:gt(100))
kiln.output("y", kiln.remainder(v, 7):cast("f32") * x)
