-- A module whose path holds "*/" and "??/": every kernel it creates names it in comments.
local kiln = require "kiln"
return { scale = function(v) return kiln.relu(v * 2) end }
