local x = kiln.input("x", {2, 3})
kiln.output("y", kiln.concat({x, nil, x}, 1))
-- expect: tests/robust/err/concat_hole.lua:2: error: concat: entry 2 of the array is a nil, not a tensor
