-- evil_state.lua — a model with state whose names are hostile to the Metal target's
-- generated API: entries named `model` (the table is <m>_metal_model), `h` (the include
-- guard <M>_METAL_H), `prefill` and `metal_prefill` (the C target's <m>_metal_prefill
-- is the Metal wrapper's name of `prefill`), inputs named like the wrapper's own
-- parameters and locals (k, err, errlen, inputs, outputs), and a state whose name
-- would end a comment or break a string. tests/t_hardening.sh builds it for C and
-- Metal, compiles every file and one unit including both headers, and runs each entry
-- on the Metal emulator.
local kiln = require "kiln"
local s = kiln.state("c*/ \"st\" /*", {4, 2})

local function step(name, rows)
  kiln.entry(name, function()
    local k = kiln.input("k", {rows, 2})
    local err = kiln.input("err", {}, "i32")
    kiln.write(s, k, {axis = 0, at = err})
    kiln.output("inputs", s * 1)
    kiln.output("outputs", kiln.sum(s))
  end)
end
step("model", 1)
step("h", 2)
step("prefill", 3)
step("metal_prefill", 1)
kiln.entry("errlen", function()
  kiln.output("errlen", kiln.sum(s))
end)
