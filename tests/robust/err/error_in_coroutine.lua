local x = kiln.input("x", {4})
local co = coroutine.wrap(function() return x + kiln.constant({1, 2, 3}) end)
kiln.output("y", co())
