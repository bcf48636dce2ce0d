local x = kiln.input("x", {4})
local t = {}
for i = 1, 1e9 do t[i] = {i} end
kiln.output("y", x)
-- flags: --lua-max-memory 16
-- expect: tests/robust/err/sandbox_memory_bomb.lua: error: the model script used more than its 16 MiB of Lua memory (raise the cap with --lua-max-memory MIB, 0 = none)
