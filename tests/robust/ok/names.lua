-- Long names, unicode and comment-breaking characters in parameter and module names;
-- the generated C must still compile and agree with the interpreter.
local nn = kiln.nn
local long_in = "x_" .. string.rep("long", 60)
local x = kiln.input(long_in, {1, 4})
local fc = nn.Linear(4, 3)
nn.name(fc, "ünïcødé.\"q\"*/ //\\n.😀")
local w = kiln.param("p." .. string.rep("é", 300), {3}, {"ones"})
kiln.output("y_" .. string.rep("out", 80), fc(x) * w)
