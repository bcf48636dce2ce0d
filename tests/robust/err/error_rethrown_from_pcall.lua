local x = kiln.input("x", {4})
local ok, e = pcall(function() return x:reshape(3) end)
error(e, 0)
