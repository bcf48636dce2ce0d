-- matvec4096.lua — peer benchmark workload matvec4096: y = w @ x, w [4096, 4096], x [4096].
local kiln = require "kiln"
kiln.load(require("nets").weights("matvec4096"), {strict = true})
local x = kiln.input("x", {4096})
kiln.output("y", kiln.matmul(kiln.param("w", {4096, 4096}), x))
