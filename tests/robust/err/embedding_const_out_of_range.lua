local nn = kiln.nn
local emb = nn.Embedding(10, 4)
kiln.output("y", emb(kiln.constant({3, 10}, {2}, "i32")))
-- expect: tests/robust/err/embedding_const_out_of_range.lua:2: error: embedding: constant index 10 (entry 1) is out of range for dim 0 of [10, 4] (0..9) (in nn.Embedding, called at tests/robust/err/embedding_const_out_of_range.lua:3)
