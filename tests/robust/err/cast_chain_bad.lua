local x = kiln.input("x", {4})
kiln.output("y", x:cast("i32"):cast("bool"):relu())
