-- implicit.lua — state without kiln.entry: the script is its one entry, <m>_run, which
-- then takes the state and returns a status. An i32 state: the history of the tokens
-- seen, one per position.
local kiln = require "kiln"
local hist = kiln.state("hist", {8}, "i32")
local tok = kiln.input("tok", {1}, "i32")
local pos = kiln.input("pos", {}, "i32")
kiln.write(hist, tok, {at = pos})
kiln.output("seen", kiln.cast(hist, "f32") * 1)
