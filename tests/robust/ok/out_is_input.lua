-- An output that is an input, the same input as a second output, and the input used
-- by an op too: legalize must copy, every buffer distinct.
local x = kiln.input("x", {2, 3})
kiln.output("same", x)
kiln.output("again", x)
kiln.output("doubled", x * 2)
