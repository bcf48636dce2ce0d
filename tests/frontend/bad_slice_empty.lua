-- expect: tests/frontend/bad_slice_empty.lua:4: error: slice: dim 1 range 3:3 of [2, 3] is empty (Kiln has no empty tensors)
local kiln = require "kiln"
local x = kiln.input("x", {2, 3})
kiln.output("y", x:slice(-1, 5, 10))
