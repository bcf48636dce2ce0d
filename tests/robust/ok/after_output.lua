-- Ops after kiln.output, an output declared before a later one that uses it, and
-- dead code that never reaches an output.
local x = kiln.input("x", {2, 2})
local y = x:tanh()
kiln.output("y", y)
local dead = y:exp():sum()
kiln.output("z", y * 3 - x)
