-- keyword.lua — must fail for Core ML: an input named after a MIL reserved word (line 3).
local kiln = require "kiln"
local tensor = kiln.input("tensor", {2, 3})
kiln.output("y", kiln.relu(tensor))
