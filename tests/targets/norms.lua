-- LayerNorm and RMSNorm alone (no softmax in the file): the C target's row helpers are
-- written for the norms' sums only, which must still compile clean under Clang -Werror
-- (t_compile); t_metal runs it on the emulator, t_coreml through milrun, each compared with
-- the C target.
local kiln = require "kiln"
local nn = require "kiln.nn"
local x = kiln.input("x", {3, 40})
local ln = nn.name(nn.LayerNorm(40), "ln")
local rms = nn.name(nn.RMSNorm(40), "rms")
kiln.output("layernorm", ln(x))
kiln.output("rmsnorm", rms(x * 2))
