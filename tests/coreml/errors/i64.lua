-- i64.lua — must fail for Core ML: an i64 input (Core ML model inputs have no int64 type; line 3).
local kiln = require "kiln"
local ids = kiln.input("ids", {2, 3}, "i64")
kiln.output("y", ids + 1)
