-- gather_elements with indices whose other dims differ from x's
-- expect: tests/frontend/bad_gather_elements.lua:5: error: gather_elements: indices [3, 2] and x [4, 40] differ in dim 0 (only dim 1 may)
local kiln = require "kiln"
local x = kiln.input("x", {4, 40})
kiln.output("v", kiln.gather_elements(x, kiln.input("i", {3, 2}, "i32"), 1))
