-- An input nothing reads stays in the signature (callers pass it; it is ignored).
local x = kiln.input("x", {3})
local unused = kiln.input("unused", {5}, "i32")
kiln.output("y", x:relu())
