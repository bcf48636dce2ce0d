-- tinyq.lua — the generated code for weights kept in stored formats (tinyq.args: the
-- Linear weight as q4_0, the embedding table as q8_0; docs/quantization.md).
local kiln = require "kiln"
kiln.seed(5)
local ids = kiln.input("ids", {2}, "i32")
local emb = kiln.param("embed.weight", {8, 64}, {"normal", 0, 1})
local proj = kiln.param("proj.weight", {40, 64}, {"normal", 0, 1})
local h = kiln.embedding(emb, ids)
kiln.output("y", kiln.gelu(kiln.linear(h, proj)))   -- an epilogue calling erf: its AVX-512 twin (rows512.c.tmpl)
