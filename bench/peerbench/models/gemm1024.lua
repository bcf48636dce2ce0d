-- gemm1024.lua — peer benchmark workload gemm1024: y = x @ w, all [1024, 1024].
local kiln = require "kiln"
kiln.load(require("nets").weights("gemm1024"), {strict = true})
local x = kiln.input("x", {1024, 1024})
kiln.output("y", kiln.matmul(x, kiln.param("w", {1024, 1024})))
