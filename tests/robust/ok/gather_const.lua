-- gather and embedding with constant i32 indices of several ranks, repeats included.
local x = kiln.input("x", {5, 3})
local rows = kiln.constant({4, 0, 4, 2}, {4}, "i32")
local cols = kiln.constant({{2, 0}, {1, 1}}, nil, "i32")
kiln.output("rows", kiln.gather(x, rows, 0))
kiln.output("cols", x:gather(cols, -1))
kiln.output("emb", kiln.embedding(x, kiln.constant(3, nil, "i32")))
