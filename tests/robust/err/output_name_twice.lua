local x = kiln.input("x", {4})
kiln.output("y", x:relu())
kiln.output("Y", x:exp())
-- expect: tests/robust/err/output_name_twice.lua:3: error: kiln.output: name 'Y' is already used by output 'y' (names must differ even in case)
