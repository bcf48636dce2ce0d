-- print goes to stderr: `kiln graph` and `kiln run` output stays clean (the sandbox has no io;
-- tests/robust/err/sandbox_* check io and os are refused, t_hardening that --unsafe-lua keeps
-- io.write and io.stdout on stderr too).
print("print from the script", 1, nil, true)
local x = kiln.input("x", {2})
kiln.output("y", x + 1)
