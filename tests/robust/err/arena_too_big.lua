-- Every tensor is within the limit, but the scratch arena they need is not: caught
-- after memory planning (build only; `kiln graph` plans no memory).
-- build-only
local x = kiln.input("x", {1073741824})
kiln.output("y", x:softmax(0):sum())
-- expect: tests/robust/err/arena_too_big.lua: error: the model needs 0 bytes of weights and 4294967296 of scratch arena; generated code addresses at most 2147483647 bytes of each
