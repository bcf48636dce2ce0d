kiln.output("y", kiln.concat({}, 0))
-- expect: tests/robust/err/concat_empty.lua:1: error: concat: the array of tensors is empty
