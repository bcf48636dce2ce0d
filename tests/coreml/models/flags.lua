-- flags.lua — the Core ML target's state cases the other stateful models do not cover:
-- a bool state (an fp16 Core ML state holding 0/1, cast to and from bool), a write at a
-- constant offset guarded by an entry's run-time offset check, and an entry without
-- a state write that reads two states. `mark` stores x > 0 at rows pos, pos + 1 of
-- `seen` and x itself at column 2 of `last`; `count` reads both.
local kiln = require "kiln"
local seen = kiln.state("flags.seen", {6, 1}, "bool")
local last = kiln.state("flags.last", {2, 3})

kiln.entry("mark", function()
  local x = kiln.input("x", {2, 1})
  local pos = kiln.input("pos", {}, "i32")
  kiln.write(seen, kiln.gt(x, 0), {axis = 0, at = pos})
  kiln.write(last, x:reshape(2, 1), {axis = 1, at = 2})
  kiln.output("hits", kiln.sum(kiln.cast(seen, "f32")))
end)

kiln.entry("count", function()
  kiln.output("seen", kiln.cast(seen, "i32"):reshape(6))
  kiln.output("total", kiln.sum(last) * 1)
end)
