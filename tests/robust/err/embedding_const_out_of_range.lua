local nn = kiln.nn
local emb = nn.Embedding(10, 4)
kiln.output("y", emb(kiln.constant({3, 10}, {2}, "i32")))
