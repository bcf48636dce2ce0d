local x = kiln.input("x", {4})
local s = string.rep("x", 1 << 30)
kiln.output("y", x)
-- flags: --lua-max-memory 64
-- expect: tests/robust/err/sandbox_string_bomb.lua: error: the model script used more than its 64 MiB of Lua memory (raise the cap with --lua-max-memory MIB, 0 = none)
