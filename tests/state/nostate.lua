-- nostate.lua — entry points without state: two functions over one weights file (the
-- shared parameter is stored once), each returning void like a plain model's run.
local kiln = require "kiln"
local w = kiln.param("w", {3, 3}, {"uniform", -1, 1})

kiln.entry("one", function()
  kiln.output("y", kiln.matmul(kiln.input("x", {1, 3}), w))
end)

kiln.entry("many", function()
  kiln.output("y", kiln.relu(kiln.matmul(kiln.input("x", {4, 3}), w)))
end)
