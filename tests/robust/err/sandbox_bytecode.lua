-- A crafted binary chunk (a header and garbage) crashes the Lua VM if loaded: only text loads.
local x = kiln.input("x", {4})
local f = assert(load("\27LuaT\0\25\147\r\n\26\n\4\8\8xV\0\0\0\0\0\0\0\0\0\0\0(w@\1\255\255\255\255\255\255"))
kiln.output("y", x)
-- expect: tests/robust/err/sandbox_bytecode.lua:3: error: attempt to load a binary chunk (mode is 't')
