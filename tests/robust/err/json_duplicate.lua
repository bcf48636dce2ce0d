local cfg = kiln.json("data/dup.json")
kiln.output("y", kiln.input("x", {4}))
-- expect: tests/robust/err/json_duplicate.lua:1: error: tests/robust/err/data/dup.json: bad JSON at byte 33: duplicate key "hidden_size"
