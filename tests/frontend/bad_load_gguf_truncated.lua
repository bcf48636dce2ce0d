-- A GGUF file cut short: the error names the file, the tensor and the problem.
local kiln = require "kiln"
kiln.load("weights/truncated.gguf")
-- expect: tests/frontend/bad_load_gguf_truncated.lua:3: error: tests/frontend/weights/truncated.gguf: tensor 'output_norm.weight': bytes [544, 556) run past the data section (546 bytes; truncated file?)
