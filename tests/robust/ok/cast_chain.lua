-- Casts through every dtype and back, on values that exercise truncation and != 0.
local x = kiln.input("x", {8})
local i = (x * 3):cast("i32")
kiln.output("i", i)
kiln.output("b", i:cast("bool"))
kiln.output("back", i:cast("bool"):cast("f32"):cast("i32"):cast("f32"))
kiln.output("f", i:cast("f32") / 2)
