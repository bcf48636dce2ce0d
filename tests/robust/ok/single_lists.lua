-- concat/stack of one tensor, a chunk that is the whole tensor, slices with huge bounds.
local x = kiln.input("x", {3, 4})
kiln.output("cat1", kiln.concat({x}, 1))
kiln.output("stack1", kiln.stack({x}, -1))
kiln.output("chunk1", (x:chunk(1, 1)))
kiln.output("big_step", x:slice(1, 1, math.maxinteger, math.maxinteger))
kiln.output("clamped", x:slice(0, math.mininteger, math.maxinteger, 2))
