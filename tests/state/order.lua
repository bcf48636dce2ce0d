-- order.lua — reads of a state version traced after the write that replaces it. `step`
-- writes x at row pos of a [3, 4] state; `old_sum` and `old` read the state as the call
-- found it (a view taken before the write, used after it), `new` reads it after the
-- write. Traced in this order, a naive schedule would run the write first: the reads
-- must move ahead of it (pass_schedule), `old` through the copy legalize adds for an
-- output that is a state version.
local kiln = require "kiln"
local st = kiln.state("st", {3, 4})

kiln.entry("step", function()
  local x = kiln.input("x", {1, 4})
  local pos = kiln.input("pos", {}, "i32")
  local old = st:reshape(12)                     -- a view of the state before the write
  kiln.write(st, x * 2, {axis = 0, at = pos})
  kiln.output("new", st + 1)                     -- after the write
  kiln.output("old_sum", kiln.sum(old))          -- before it, although traced after it
  kiln.output("old", old)                        -- before it: a copy of the old version
end)
