-- i64.lua — audit family "i64 inputs": token ids declared as PyTorch exports them (int64);
-- the model reads them as i32 (the one reader an i64 input may have is a cast).
local kiln = require "kiln"

local ids = kiln.input("ids", {6}, "i64")
kiln.output("i64_ids", ids:cast("i32") * 2 + 1)
