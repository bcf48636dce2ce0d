-- print, io.write and io.stdout go to stderr: `kiln graph` and `kiln run` output stays clean.
print("print from the script")
io.write("io.write from the script\n")
io.stdout:write("io.stdout from the script\n")
local x = kiln.input("x", {2})
kiln.output("y", x + 1)
