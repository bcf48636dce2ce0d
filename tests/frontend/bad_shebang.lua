#!/usr/bin/env kiln
-- expect: tests/frontend/bad_shebang.lua:5: error: mul: shapes [2, 2] and [3] do not broadcast
local kiln = require "kiln"
local x = kiln.input("x", {2, 2})
kiln.output("y", x * kiln.input("z", {3}))
