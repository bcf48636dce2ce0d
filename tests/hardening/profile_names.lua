-- profile_names.lua — names that a `kiln build --profile` adds could clash with: entries
-- called profile and prof_tick (their functions pn_profile, pn_prof_tick), an input called
-- profile (the macro PN_PROFILE_SIZE), one called TIME_UTC and kernels called time and clock
-- (<time.h>, which the profile includes). t_hardening builds it with and without --profile:
-- the entry functions keep their names either way, and both builds compile strictly.
local kiln = require "kiln"
local nn = kiln.nn
kiln.seed(2)

local acc = kiln.state("acc", {4, 3})
local time = nn.name(nn.Linear(3, 3), "time")
local clock = nn.name(nn.Linear(3, 3), "clock")

kiln.entry("profile", function()
  local x = kiln.input("profile", {4, 3})
  local t = kiln.input("TIME_UTC", {4, 3})
  local y = clock(time(x)) + t
  kiln.write(acc, y, {axis = 0, at = 0})
  kiln.output("y", y)
end)

kiln.entry("prof_tick", function()
  local x = kiln.input("x", {1, 3})
  kiln.output("total", kiln.sum(acc) + kiln.sum(x))
end)
