-- chain.lua — a state written twice in one entry, along its second axis, and read between
-- the writes: `two` stores x at columns pos.. of every row, then y at column 0; `mid`
-- sees the first write only, `out` both. `peek` only reads the state (an entry that
-- writes nothing), so the state must come back unchanged.
local kiln = require "kiln"
local s = kiln.state("grid", {2, 5})

kiln.entry("two", function()
  local x = kiln.input("x", {2, 2})
  local y = kiln.input("y", {2, 1})
  local pos = kiln.input("pos", {}, "i32")
  kiln.write(s, x, {axis = 1, at = pos})
  local mid = kiln.sum(s, {1})
  kiln.write(s, y, {axis = -1, at = 0})
  kiln.output("mid", mid)
  kiln.output("out", s * 1)
end)

kiln.entry("peek", function()
  kiln.output("total", kiln.sum(s))
end)
