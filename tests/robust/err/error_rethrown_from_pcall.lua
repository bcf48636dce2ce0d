local x = kiln.input("x", {4})
local ok, e = pcall(function() return x:reshape(3) end)
error(e, 0)
-- expect: tests/robust/err/error_rethrown_from_pcall.lua:2: error: reshape: cannot reshape [4] (4 elements) into [3]
