-- vecmat4096.lua — peer benchmark workload vecmat4096: y = x @ w, x [1, 4096], w [4096, 4096].
local kiln = require "kiln"
kiln.load(require("nets").weights("vecmat4096"), {strict = true})
local x = kiln.input("x", {1, 4096})
kiln.output("y", kiln.matmul(x, kiln.param("w", {4096, 4096})))
