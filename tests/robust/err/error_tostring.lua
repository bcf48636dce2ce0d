error(setmetatable({}, {__tostring = function() return "custom error object" end}))
-- expect: tests/robust/err/error_tostring.lua:1: error: custom error object
