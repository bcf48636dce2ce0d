-- expect: tests/frontend/bad_error_call.lua:5: error: model needs an even width
local kiln = require "kiln"
local width = 7
if width % 2 == 1 then
  error("model needs an even width")
end
