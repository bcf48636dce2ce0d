-- big_arena.lua — every tensor is within Kiln's per-tensor limit, but the scratch arena
-- they need is 4 GiB: t_build checks that the build plans it with 64-bit offsets and
-- that the generated C compiles (it never runs: that would need the 4 GiB).
local kiln = require "kiln"
local x = kiln.input("x", {1073741824})
kiln.output("y", x:softmax(0):sum())
