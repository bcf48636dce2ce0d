-- evil_names.lua — parameter, module and source-file names hostile to every output language
-- Kiln writes (C and MSL comments, C string literals, JSON, MIL). The names are data: none
-- may end a comment, form a trigraph, break a string literal or JSON, or add code.
-- tests/t_hardening.sh builds it for every target and compiles every generated file.
local kiln = require "kiln"
local nn = require "kiln.nn"
local mod = require "evil*.??.mod"     -- source file "evil*/??/mod.lua": a comment end and a trigraph

local names = {
  "w*/ }; int kiln_injected(void) { return 42; } const KilnMtlBinding more[] = { /*",
  "a/*b*/c",
  "tri??/gr??=aph??(x??)y??-",
  "q\"uo'te\"",
  "back\\slash\\",
  string.rep("ünïcødé-漢字-🙂", 12),
  "int",
  "bad\xff\xfeutf8",
  "?",
  "??",
  "??/",
}

local x = kiln.input("x", {1, 4})
local y = x
for _, n in ipairs(names) do
  y = kiln.tanh(kiln.matmul(y, kiln.param(n, {4, 4}, {"uniform", -0.5, 0.5})))
end
local Block = nn.Module("Block")
function Block:init()
  self["l*/in??/"] = nn.Linear(4, 4)
end
function Block:forward(v) return self["l*/in??/"](v) end
y = mod.scale(Block()(y))
kiln.output("y", y)
