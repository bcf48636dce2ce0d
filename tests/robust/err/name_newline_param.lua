-- A control byte in a name would break the line of every comment, string and message it reaches.
local x = kiln.input("x", {2})
local w = kiln.param("w\nint evil;", {2})
kiln.output("y", x + w)
-- expect: tests/robust/err/name_newline_param.lua:3: error: kiln.param: argument 1 (the name) contains the control character 0x0a
