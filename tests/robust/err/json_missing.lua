local cfg = kiln.json("data/config.json")
kiln.output("y", kiln.input("x", {4}))
-- expect: tests/robust/err/json_missing.lua:1: error: tests/robust/err/data/config.json: cannot open: No such file or directory
