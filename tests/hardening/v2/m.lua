-- Two builds of model "m" that differ in every file (tests/hardening/publish.py).
local kiln = require "kiln"
local x = kiln.input("x", {8})
kiln.output("y", kiln.relu(x + kiln.param("b", {8})))
