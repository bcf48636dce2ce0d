-- expect: tests/frontend/bad_load_missing.lua:3: error: tests/frontend/no_such_weights.safetensors: cannot open: No such file or directory
local kiln = require "kiln"
kiln.load("no_such_weights.safetensors")
local x = kiln.input("x", {1, 4})
kiln.output("y", x)
