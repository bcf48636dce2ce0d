-- Ops inside coroutines, and errors caught by pcall/xpcall (with table error
-- objects) leave no trace in the graph.
local x = kiln.input("x", {4})
local gen = coroutine.wrap(function()
  local y = x
  for _ = 1, 3 do
    y = y + 1
    coroutine.yield(y)
  end
end)
local a, b = gen(), gen()
local ok, err = pcall(function() return x + kiln.constant({1, 2, 3}) end)
assert(not ok and err:find("do not broadcast"), err)
ok, err = pcall(error, {code = 7})
assert(not ok and err.code == 7)
local ok2 = xpcall(function() return x:reshape(3) end, function(m) return "handled: " .. m end)
assert(not ok2)
kiln.output("a", a)
kiln.output("b", b * a)
