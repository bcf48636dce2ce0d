-- flags: -D layers=two
local n = kiln.option("layers", 2)
kiln.output("y", kiln.input("x", {4}) * n)
-- expect: tests/robust/err/option_type.lua:2: error: kiln.option: -D layers=two: an integer is expected (the default is 2)
