local x = kiln.input("x", {4})
local m = require("..secret")
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_require_escape.lua:2: error: module '..secret': a module name is dot-separated words below the script's directory
