local kiln = require "kiln"
kiln.load("weights/truncated.gguf", {names = "hf"})
-- expect: tests/frontend/bad_load_names_value.lua:2: error: kiln.load: names must be "file" or "meta", got hf
