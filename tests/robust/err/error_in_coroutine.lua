local x = kiln.input("x", {4})
local co = coroutine.wrap(function() return x + kiln.constant({1, 2, 3}) end)
kiln.output("y", co())
-- expect: tests/robust/err/error_in_coroutine.lua:2: error: add: shapes [4] and [3] do not broadcast
