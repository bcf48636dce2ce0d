-- A -D the script never reads is a mistake (a misspelt option), reported after the script ran.
-- flags: -D max_contxt=4096
local x = kiln.input("x", {4})
kiln.output("y", x * kiln.option("max_context", 512))
-- expect: tests/robust/err/option_unknown.lua: error: -D max_contxt: the script asks for no option 'max_contxt' (kiln.option)
