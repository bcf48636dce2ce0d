-- Two builds of model "m" that differ in every file (tests/hardening/publish.py).
local kiln = require "kiln"
local x = kiln.input("x", {4})
kiln.output("y", kiln.tanh(x * kiln.param("w", {4})))
