-- names = "meta" renames llama.cpp's tensor names, so it needs a GGUF file.
local kiln = require "kiln"
kiln.load("weights/one.safetensors", {names = "meta"})
-- expect: tests/frontend/bad_load_names.lua:3: error: kiln.load: names = "meta" renames llama.cpp's tensor names; weights/one.safetensors is not a GGUF file
