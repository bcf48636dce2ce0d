-- onnx_ops.lua — the ONNX op handlers of `kiln import` (onnx.lua runs the graph and owns
-- the values; this file says what each ONNX op becomes in Kiln's Lua API): elementwise
-- ops, products, convolutions and pooling, normalisations, reductions, losses and
-- resampling. onnx_shape.lua has the shape and indexing ops.
--
-- H[op] = {attrs = "names it reads", f = function() ... end}: f reads the inputs and
-- attributes of the current node (C.N) through the helpers and defines its outputs with
-- out (a script line) or out_const (an import-time constant). An attribute a handler does
-- not list is an error in onnx.lua: an unsupported attribute is never silently ignored.
-- fold[op](ins) computes an op whose inputs are all import-time constants (shape chains,
-- Constant nodes), returning values, shape and dtype, or nil to translate it normally.
local C = ...
local H, fold, N, vals, opset = C.H, C.fold, C.N, C.vals, C.opset
local fail, who, input, need_input, attr = C.fail, C.who, C.input, C.need_input, C.attr
local const_input, need_dt, out, out_const, only_outputs = C.const_input, C.need_dt, C.out, C.out_const, C.only_outputs
local ref, arg, num, numel, shape_lua, ints_lua = C.ref, C.arg, C.num, C.numel, C.shape_lua, C.ints_lua
local copy, bcast, axis_of, strides = C.copy, C.bcast, C.axis_of, C.strides
local line, bind, lua_name, use_table = C.line, C.bind, C.lua_name, C.use_table
local kiln_dtype, onnx_dtype_names, tensor_value, convert_values = C.kiln_dtype, C.onnx_dtype_names, C.tensor_value,
  C.convert_values

-- The one value of constant input i (a scalar or a one-element tensor).
local function scalar_input(i, what)
  local k = const_input(i, what)
  if not k or #k ~= 1 then fail("%s: input %d (%s) must hold one value", who(), i, what) end
  return k[1]
end

local function op(names, attrs, f)
  for name in names:gmatch("%S+") do H[name] = {attrs = attrs, f = f} end
end

-- Folding works on Lua tables: a constant result past this many elements is refused
-- (a hostile file could otherwise ask for billions), as too large to import.
local FOLD_MAX = 1 << 20
local function fold_limit(n)
  if n > FOLD_MAX then fail("%s: a constant of %d elements is too large to import", who(), n) end
end
C.op, C.fold_limit, C.scalar_input = op, fold_limit, scalar_input   -- for onnx_shape.lua

local function map2(a, b, shape, f)
  fold_limit(numel(shape))
  local out = {}
  local sa, sb = strides(a.shape), strides(b.shape)
  local st = strides(shape)
  local r = #shape
  for i = 0, numel(shape) - 1 do
    local ia, ib, rem = 0, 0, i
    for d = 1, r do
      local c = rem // st[d]
      rem = rem % st[d]
      local da = d - (r - #a.shape)
      local db = d - (r - #b.shape)
      if da >= 1 and a.shape[da] ~= 1 then ia = ia + c * sa[da] end
      if db >= 1 and b.shape[db] ~= 1 then ib = ib + c * sb[db] end
    end
    out[i + 1] = f(a.k[ia + 1], b.k[ib + 1])
  end
  return out
end

local function int_div(x, y)
  if y == 0 then fail("%s: integer division by zero in a constant", who()) end
  local q = x // y
  if q < 0 and q * y ~= x then q = q + 1 end   -- truncate toward zero, as C
  return q
end

local arith = {
  Add = function(x, y) return x + y end, Sub = function(x, y) return x - y end,
  Mul = function(x, y) return x * y end,
  Equal = function(x, y) return x == y and 1 or 0 end, Less = function(x, y) return x < y and 1 or 0 end,
  Greater = function(x, y) return x > y and 1 or 0 end,
  Max = function(x, y) return math.max(x, y) end, Min = function(x, y) return math.min(x, y) end,
}
for name, f in pairs(arith) do
  fold[name] = function(ins)
    if #ins ~= 2 then return nil end
    local shape = bcast(ins[1].shape, ins[2].shape, who())
    local dt = (name == "Equal" or name == "Less" or name == "Greater") and "bool" or ins[1].dt
    local k = map2(ins[1], ins[2], shape, f)
    if dt == "i32" then for i, v in ipairs(k) do k[i] = math.tointeger(v) or v end end
    return k, shape, dt
  end
end
fold.Div = function(ins)
  local shape = bcast(ins[1].shape, ins[2].shape, who())
  local f = ins[1].dt == "i32" and int_div or function(x, y) return x / y end
  return map2(ins[1], ins[2], shape, f), shape, ins[1].dt
end
fold.Neg = function(ins) local k = {} for i, v in ipairs(ins[1].k) do k[i] = -v end return k, ins[1].shape, ins[1].dt end
fold.Not = function(ins) local k = {} for i, v in ipairs(ins[1].k) do k[i] = 1 - v end return k, ins[1].shape, "bool" end
fold.Identity = function(ins) return ins[1].k, ins[1].shape, ins[1].dt end
-- v's values broadcast to shape.
local function spread(v, shape) return map2(v, v, shape, function(x) return x end) end
fold.Where = function(ins)
  local c, a, b = ins[1], ins[2], ins[3]
  local shape = bcast(bcast(c.shape, a.shape, who()), b.shape, who())
  local ck, ak, bk = spread(c, shape), spread(a, shape), spread(b, shape)
  local k = {}
  for i = 1, #ck do k[i] = ck[i] ~= 0 and ak[i] or bk[i] end
  return k, shape, a.dt
end
fold.ReduceProd = function(ins)
  if N.node.attrs.axes then return nil end
  local p = 1
  for _, v in ipairs(ins[1].k) do p = p * v end
  return {p}, attr("keepdims", "i", 1) == 1 and (function() local s = {} for i = 1, #ins[1].shape do s[i] = 1 end return s end)() or {}, ins[1].dt
end

-- True when v is one of ONNX's 8- or 16-bit integers (carried as int32, onnx.lua): its
-- values and their quotients are exact in float32, so integer division goes through it.
local function small_int(v) return v.odt and C.carried[v.odt].bits and C.carried[v.odt].bits <= 16 end

-- a / b truncated toward zero, for small_int operands (Sa, Sb: their Lua expressions):
-- float32 holds both, and its rounded quotient truncates to the exact one, because an
-- integer k with k * |b| <= |a| < 2^16 is never within a rounding (2^-24 k) of a / b.
local function trunc_div(sa, sb)
  return string.format("kiln.cast(kiln.cast(%s, \"f32\") / kiln.cast(%s, \"f32\"), \"i32\")", sa, sb)
end
C.small_int, C.trunc_div = small_int, trunc_div   -- for onnx_quant.lua

-- Elementwise binary ops: an operator form where Lua has one.
local binop = {Add = "+", Sub = "-", Mul = "*", Div = "/", Pow = "^"}
-- Contract: the opset < 7 attributes of the binary ops and Gemm: `broadcast` = 1 let B's
-- shape match a suffix of A's (or, with `axis`, the dims of A from axis on), which numpy
-- broadcasting gives as well when B lines up with A's trailing dims; any other alignment fails.
local function legacy_broadcast(a, b)
  if N.node.attrs.broadcast == nil and N.node.attrs.axis == nil then return end
  local axis = attr("axis", "i", nil)
  if axis and b and axis % #a.shape ~= #a.shape - #b.shape then
    fail("%s: legacy broadcast with axis %d (not B's trailing alignment) is not supported", who(), axis)
  end
end

op("Add Sub Mul Div Pow", "broadcast axis", function()
  local a, b = need_input(1, "A"), need_input(2, "B")
  local o = N.node.op
  legacy_broadcast(a, b)
  if o == "Pow" and a.dt == "i32" then   -- integer powers through f32, rounded back: exact below 2^24
    need_dt(b, "f32 i32", "input B")
    local shape = bcast(a.shape, b.shape, who())
    out(1, string.format("kiln.cast(kiln.round(kiln.cast(%s, \"f32\") ^ kiln.cast(%s, \"f32\")), \"i32\")", ref(a), ref(b)),
      shape, "i32")
    return
  end
  if o == "Div" and small_int(a) and small_int(b) then   -- integer division truncates (onnx.lua wraps -128 / -1)
    out(1, trunc_div(ref(a), ref(b)), bcast(a.shape, b.shape, who()), "i32")
    return
  end
  if o == "Div" or o == "Pow" then need_dt(a, "f32", "input A") else need_dt(a, "f32 i32", "input A") end
  if o ~= "Pow" and a.dt ~= b.dt then fail("%s: inputs of dtypes %s and %s", who(), a.dt, b.dt) end
  local shape = bcast(a.shape, b.shape, who())
  local sa, sb = arg(a), arg(b)
  if o == "Pow" and b.dt ~= "f32" then sb = string.format("kiln.cast(%s, \"f32\")", sb) end   -- an integer exponent
  if sa:match("^%-") then sa = "(" .. sa .. ")" end
  if sb:match("^%-") then sb = "(" .. sb .. ")" end
  out(1, string.format("%s %s %s", sa, binop[o], sb), shape, a.dt)
end)

local cmp = {Equal = "eq", Less = "lt", LessOrEqual = "le", Greater = "gt", GreaterOrEqual = "ge"}
op("Equal Less LessOrEqual Greater GreaterOrEqual", "", function()
  local a, b = need_input(1, "A"), need_input(2, "B")
  local shape = bcast(a.shape, b.shape, who())
  local sa, sb = ref(a), ref(b)
  if a.dt == "bool" then sa = string.format("kiln.cast(%s, \"i32\")", sa) end
  if b.dt == "bool" then sb = string.format("kiln.cast(%s, \"i32\")", sb) end
  out(1, string.format("kiln.%s(%s, %s)", cmp[N.node.op], sa, sb), shape, "bool")
end)

op("And Or Xor", "", function()
  local a, b = need_input(1, "A"), need_input(2, "B")
  need_dt(a, "bool", "input A")
  need_dt(b, "bool", "input B")
  local shape = bcast(a.shape, b.shape, who())
  local ia, ib = string.format("kiln.cast(%s, \"i32\")", ref(a)), string.format("kiln.cast(%s, \"i32\")", ref(b))
  local e = ({And = "kiln.min(%s, %s):ne(0)", Or = "kiln.max(%s, %s):ne(0)", Xor = "kiln.ne(%s, %s)"})[N.node.op]
  out(1, string.format(e, ia, ib), shape, "bool")
end)

op("Not", "", function()
  local x = need_input(1, "X")
  need_dt(x, "bool", "input X")
  out(1, string.format("kiln.cast(%s, \"i32\"):eq(0)", ref(x)), x.shape, "bool")
end)

-- Variadic elementwise ops.
op("Sum Mean Max Min", "", function()
  local ins = {}
  for i = 1, #N.node.inputs do ins[#ins + 1] = input(i) end
  if #ins == 0 then fail("%s: no inputs", who()) end
  local shape = ins[1].shape
  for i = 2, #ins do shape = bcast(shape, ins[i].shape, who()) end
  local o = N.node.op
  need_dt(ins[1], (o == "Sum" or o == "Mean") and "f32" or "f32 i32", "input 1")
  local e = ref(ins[1])
  for i = 2, #ins do
    if ins[i].dt ~= ins[1].dt then fail("%s: inputs of dtypes %s and %s", who(), ins[1].dt, ins[i].dt) end
    if o == "Sum" or o == "Mean" then e = e .. " + " .. ref(ins[i])
    else e = string.format("kiln.%s(%s, %s)", o:lower(), e, ref(ins[i])) end
  end
  if o == "Mean" and #ins > 1 then e = "(" .. e .. ") / " .. #ins end
  out(1, #ins == 1 and ref(ins[1]) or e, shape, ins[1].dt)
end)

-- Unary float functions: ONNX op -> Lua expression pattern (%s: the input).
local unary = {
  Exp = "kiln.exp(%s)", Log = "kiln.log(%s)", Sqrt = "kiln.sqrt(%s)", Tanh = "kiln.tanh(%s)",
  Sigmoid = "kiln.sigmoid(%s)", Relu = "kiln.relu(%s)", Erf = "kiln.erf(%s)", Floor = "kiln.floor(%s)",
  Ceil = "kiln.ceil(%s)", Round = "kiln.round(%s)", Sin = "kiln.sin(%s)", Cos = "kiln.cos(%s)",
  Tan = "kiln.sin(%s) / kiln.cos(%1$s)", Reciprocal = "kiln.reciprocal(%s)", Sign = "kiln.sign(%s)",
  Softplus = "kiln.log(kiln.exp(%s) + 1)", Softsign = "%s / (kiln.abs(%1$s) + 1)", Mish = "kiln.mish(%s)",
  HardSwish = "kiln.hardswish(%s)", IsNaN = "kiln.ne(%s, %1$s)",
  Sinh = "(kiln.exp(%s) - kiln.exp(-%1$s)) / 2", Cosh = "(kiln.exp(%s) + kiln.exp(-%1$s)) / 2",
  Asinh = "kiln.sign(%s) * kiln.log(kiln.abs(%1$s) + kiln.sqrt(%1$s * %1$s + 1))",
  Acosh = "kiln.log(%s + kiln.sqrt(%1$s * %1$s - 1))", Atanh = "kiln.log((%s + 1) / (1 - %1$s)) / 2",
}
local function subst(pat, x)
  return (pat:gsub("%%1%$s", x):gsub("%%s", x))
end
op("Exp Log Sqrt Tanh Sigmoid Relu Erf Floor Ceil Round Sin Cos Tan Reciprocal Sign Softplus Softsign Mish HardSwish IsNaN " ..
  "Sinh Cosh Asinh Acosh Atanh",
  "", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  out(1, subst(unary[N.node.op], ref(x)), x.shape, N.node.op == "IsNaN" and "bool" or "f32")
end)

op("Abs Neg", "", function()
  local x = need_input(1, "X")
  need_dt(x, "f32 i32", "input X")
  out(1, string.format("kiln.%s(%s)", N.node.op:lower(), ref(x)), x.shape, x.dt)
end)

op("IsInf", "detect_negative detect_positive", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local neg, pos = attr("detect_negative", "i", 1), attr("detect_positive", "i", 1)
  local e
  if neg == 1 and pos == 1 then e = "kiln.abs(%s):eq(math.huge)"
  elseif pos == 1 then e = "kiln.eq(%s, math.huge)"
  elseif neg == 1 then e = "kiln.eq(%s, -math.huge)"
  else e = "kiln.ne(%s, %1$s):ne(kiln.ne(%1$s, %1$s))" end
  out(1, subst(e, ref(x)), x.shape, "bool")
end)

op("LeakyRelu Elu Selu Celu ThresholdedRelu HardSigmoid", "alpha beta gamma", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local o, s = N.node.op, ref(x)
  local e
  if o == "LeakyRelu" then e = string.format("kiln.leaky_relu(%s, %s)", s, num(attr("alpha", "f", 0.01), "f32"))
  elseif o == "Elu" then e = string.format("kiln.elu(%s, %s)", s, num(attr("alpha", "f", 1.0), "f32"))
  elseif o == "Selu" then
    e = string.format("kiln.elu(%s, %s) * %s", s, num(attr("alpha", "f", 1.67326319217681884765625), "f32"),
      num(attr("gamma", "f", 1.05070102214813232421875), "f32"))
  elseif o == "Celu" then
    local a = num(attr("alpha", "f", 1.0), "f32")
    e = string.format("kiln.relu(%s) + kiln.min(kiln.exp(%s / %s) - 1, 0) * %s", s, s, a, a)
  elseif o == "ThresholdedRelu" then
    e = string.format("kiln.where(%s:gt(%s), %s, 0)", s, num(attr("alpha", "f", 1.0), "f32"), s)
  else
    e = string.format("kiln.clamp(%s * %s + %s, 0, 1)", s, num(attr("alpha", "f", 0.2), "f32"),
      num(attr("beta", "f", 0.5), "f32"))
  end
  out(1, e, x.shape, "f32")
end)

op("PRelu", "", function()
  local x, slope = need_input(1, "X"), need_input(2, "slope")
  need_dt(x, "f32", "input X")
  local s = ref(slope)
  if opset < 7 and #slope.shape == 1 and #x.shape >= 2 and slope.shape[1] == x.shape[2] and slope.shape[1] > 1 then
    -- before opset 7 a 1-D slope is one value per channel (dim 1), as PyTorch's PReLU
    local cshape = {slope.shape[1]}
    for d = 3, #x.shape do cshape[d - 1] = 1 end
    s = string.format("%s:reshape(%s)", s, shape_lua(cshape))
  end
  local shape = s == ref(slope) and bcast(x.shape, slope.shape, who()) or x.shape
  out(1, string.format("kiln.where(%s:lt(0), %s * %s, %s)", ref(x), ref(x), s, ref(x)), shape, "f32")
end)

op("Clip", "min max", function()
  local x = need_input(1, "input")
  need_dt(x, "f32 i32", "input")
  local lo, hi
  if opset < 11 then
    local a, b = attr("min", "f", nil), attr("max", "f", nil)
    lo, hi = a and num(a, "f32"), b and num(b, "f32")
  else
    lo, hi = input(2), input(3)
    lo, hi = lo and arg(lo), hi and arg(hi)
  end
  if not lo and not hi then out(1, ref(x), x.shape, x.dt) return end
  out(1, string.format("kiln.clamp(%s, %s, %s)", ref(x), lo or "nil", hi or "nil"), x.shape, x.dt)
end)

op("Identity", "", function()
  local x = need_input(1, "input")
  out(1, ref(x), x.shape, x.dt)
end)

op("Dropout", "ratio seed is_test", function()
  local x = need_input(1, "data")
  attr("ratio", "f", 0.5)
  attr("seed", "i", 0)
  attr("is_test", "i", 0)
  local training = input(3)
  if training then
    local k = const_input(3, "training_mode")
    -- training with ratio 0 drops nothing: the identity, deterministic like inference
    local ratio = k[1] ~= 0 and input(2) and const_input(2, "ratio")
    if k[1] ~= 0 and not (ratio and ratio[1] == 0) then
      fail("%s: training_mode is true with a ratio above 0 (random): Kiln compiles inference only", who())
    end
  end
  out(1, ref(x), x.shape, x.dt)
  if N.node.outputs[2] and N.node.outputs[2] ~= "" then   -- the mask: all kept at inference
    out(2, string.format("kiln.full(%s, true, \"bool\")", shape_lua(x.shape)), copy(x.shape), "bool")
  end
end)

op("Cast CastLike", "to saturate", function()
  local x = need_input(1, "input")
  local code
  if N.node.op == "Cast" then code = attr("to", "i", nil) else code = need_input(2, "target_type").dt end
  local dt = type(code) == "string" and code or kiln_dtype[code]
  if not dt then fail("%s: cast to %s: unsupported dtype", who(), onnx_dtype_names[code] or tostring(code)) end
  if dt == x.dt then out(1, ref(x), x.shape, dt) return end
  out(1, string.format("kiln.cast(%s, %q)", ref(x), dt), x.shape, dt)
end)
fold.Cast = function(ins)
  local dt = kiln_dtype[attr("to", "i", 0)]
  if not dt then return nil end
  local k = {}
  for i, v in ipairs(ins[1].k) do
    if dt == "i32" then
      if v ~= v or v >= 2147483648 or v <= -2147483649 then fail("%s: %s does not fit int32", who(), tostring(v)) end
      k[i] = math.tointeger(v < 0 and math.ceil(v) or math.floor(v))
    elseif dt == "bool" then k[i] = v ~= 0 and 1 or 0
    else k[i] = v + 0.0 end
  end
  return k, ins[1].shape, dt
end

op("Where", "", function()
  local c, a, b = need_input(1, "condition"), need_input(2, "X"), need_input(3, "Y")
  need_dt(c, "bool", "condition")
  local shape = bcast(bcast(c.shape, a.shape, who()), b.shape, who())
  out(1, string.format("kiln.where(%s, %s, %s)", ref(c), arg(a), arg(b)), shape, a.dt)
end)

-- ---- matrix products and convolutions ----

local function matmul_shape(a, b)
  local sa, sb = copy(a), copy(b)
  local da, db = #sa == 1, #sb == 1
  if da then table.insert(sa, 1, 1) end
  if db then sb[#sb + 1] = 1 end
  if sa[#sa] ~= sb[#sb - 1] then
    fail("%s: shapes %s and %s: inner dims %d and %d differ", who(), shape_lua(a), shape_lua(b), sa[#sa], sb[#sb - 1])
  end
  local ba, bb = {}, {}
  for i = 1, #sa - 2 do ba[i] = sa[i] end
  for i = 1, #sb - 2 do bb[i] = sb[i] end
  local shape = bcast(ba, bb, who())
  if not da then shape[#shape + 1] = sa[#sa - 1] end
  if not db then shape[#shape + 1] = sb[#sb] end
  return shape
end

op("MatMul", "", function()
  local a, b = need_input(1, "A"), need_input(2, "B")
  need_dt(a, "f32", "input A")
  need_dt(b, "f32", "input B")
  out(1, string.format("kiln.matmul(%s, %s)", ref(a), ref(b)), matmul_shape(a.shape, b.shape), "f32")
end)

op("Gemm", "alpha beta transA transB broadcast", function()
  local a, b, c = need_input(1, "A"), need_input(2, "B"), input(3)
  need_dt(a, "f32", "input A")
  local alpha, beta = attr("alpha", "f", 1.0), attr("beta", "f", 1.0)
  local ta, tb = attr("transA", "i", 0) ~= 0, attr("transB", "i", 0) ~= 0
  if #a.shape ~= 2 or #b.shape ~= 2 then fail("%s: A and B must be matrices", who()) end
  local m, k = a.shape[ta and 2 or 1], a.shape[ta and 1 or 2]
  local k2, n = b.shape[tb and 2 or 1], b.shape[tb and 1 or 2]
  if k ~= k2 then fail("%s: inner dims %d and %d differ", who(), k, k2) end
  local o = {}
  if ta then o[#o + 1] = "trans_a = true" end
  if tb then o[#o + 1] = "trans_b = true" end
  local e = string.format("kiln.matmul(%s, %s%s)", ref(a), ref(b), #o > 0 and (", {" .. table.concat(o, ", ") .. "}") or "")
  if alpha ~= 1 then e = e .. " * " .. num(alpha, "f32") end
  local shape = {m, n}
  if c and beta ~= 0 then
    shape = bcast(shape, c.shape, who())
    e = e .. " + " .. arg(c) .. (beta ~= 1 and (" * " .. num(beta, "f32")) or "")
  end
  out(1, e, shape, "f32")
end)

-- Padding (begin, end per spatial dim) of a conv or pool: explicit pads or auto_pad.
local function spatial_pads(x, k, s, d)
  local r = #k
  local auto = attr("auto_pad", "s", "NOTSET")
  local pads = attr("pads", "ints", nil)
  if pads and #pads ~= 2 * r then fail("%s: %d pads for %d spatial dims", who(), #pads, r) end
  local pb, pe = {}, {}
  for i = 1, r do
    local n = x[2 + i]
    if auto == "SAME_UPPER" or auto == "SAME_LOWER" then
      local o = (n + s[i] - 1) // s[i]
      local total = math.max(0, (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - n)
      local small = total // 2
      pb[i], pe[i] = auto == "SAME_UPPER" and small or total - small, auto == "SAME_UPPER" and total - small or small
    elseif auto == "VALID" then pb[i], pe[i] = 0, 0
    elseif auto == "NOTSET" then pb[i], pe[i] = pads and pads[i] or 0, pads and pads[r + i] or 0
    else fail("%s: auto_pad %q is not supported", who(), auto) end
    if pb[i] < 0 or pe[i] < 0 then fail("%s: negative pads", who()) end
  end
  return pb, pe
end

local function list_or(name, r, default)
  local v = attr(name, "ints", nil)
  if v and #v ~= r then fail("%s: attribute '%s' has %d values for %d spatial dims", who(), name, #v, r) end
  if v then return v end
  local t = {}
  for i = 1, r do t[i] = default end
  return t
end

-- The {..} options of conv2d/pools for 1 or 2 spatial dims (1-D: height 1).
local function two(v, r, fill) if r == 1 then return {fill, v[1]} end return v end

-- Contract: the expression and shape of the current Conv-like node's convolution of x by
-- w (+ bias b), its attributes read here; xs, ws: the operands' Lua expressions (ref(x),
-- ref(w) unless given).
local function conv(x, w, b, xs, ws)
  local r = #x.shape - 2
  if r ~= 1 and r ~= 2 then fail("%s: %d-D convolution is not supported (1-D and 2-D are)", who(), r) end
  local k = list_or("kernel_shape", r, nil)
  for i = 1, r do k[i] = k[i] or w.shape[2 + i] end
  for i = 1, r do if k[i] ~= w.shape[2 + i] then fail("%s: kernel_shape disagrees with W", who()) end end
  local s, d = list_or("strides", r, 1), list_or("dilations", r, 1)
  local g = attr("group", "i", 1)
  local pb, pe = spatial_pads(x.shape, k, s, d)
  if x.shape[2] ~= w.shape[2] * g then fail("%s: X has %d channels, W wants %d x %d groups", who(), x.shape[2], w.shape[2], g) end
  local shape = {x.shape[1], w.shape[1]}
  for i = 1, r do
    local o = (x.shape[2 + i] + pb[i] + pe[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
    if o < 1 then fail("%s: the kernel is larger than the padded input", who()) end
    shape[2 + i] = o
  end
  local o = {}
  local s2, d2 = two(s, r, 1), two(d, r, 1)
  if s2[1] ~= 1 or s2[2] ~= 1 then o[#o + 1] = "stride = " .. ints_lua(s2) end
  local p4 = r == 1 and {0, pb[1], 0, pe[1]} or {pb[1], pb[2], pe[1], pe[2]}
  if p4[1] ~= 0 or p4[2] ~= 0 or p4[3] ~= 0 or p4[4] ~= 0 then o[#o + 1] = "padding = " .. ints_lua(p4) end
  if d2[1] ~= 1 or d2[2] ~= 1 then o[#o + 1] = "dilation = " .. ints_lua(d2) end
  if g ~= 1 then o[#o + 1] = "groups = " .. g end
  xs, ws = xs or ref(x), ws or ref(w)
  if r == 1 then xs, ws = xs .. ":unsqueeze(2)", ws .. ":unsqueeze(2)" end
  local e = string.format("kiln.conv2d(%s, %s%s%s)", xs, ws, b and (", " .. ref(b)) or "",
    #o > 0 and (", {" .. table.concat(o, ", ") .. "}") or "")
  if r == 1 then e = e .. ":squeeze(2)" end
  return e, shape
end

C.conv, C.matmul_shape = conv, matmul_shape   -- for onnx_quant.lua

op("Conv", "auto_pad dilations group kernel_shape pads strides", function()
  local x, w, b = need_input(1, "X"), need_input(2, "W"), input(3)
  need_dt(x, "f32", "input X")
  local e, shape = conv(x, w, b)
  out(1, e, shape, "f32")
end)

op("MaxPool AveragePool", "auto_pad ceil_mode count_include_pad dilations kernel_shape pads storage_order strides", function()
  local x = need_input(1, "X")
  -- a max of 8-bit integers, pooled as float32 (which holds each exactly) and cast back
  local small_int = N.node.op == "MaxPool" and x.odt and (x.odt == 2 or x.odt == 3)
  if not small_int then need_dt(x, "f32", "input X") end
  local indices = N.node.op == "MaxPool" and (N.node.outputs[2] or "") ~= ""
  only_outputs(indices and 2 or 1)
  local r = #x.shape - 2
  if r < 1 then fail("%s: X needs a spatial dim", who()) end
  local k = attr("kernel_shape", "ints", nil)
  if not k or #k ~= r then fail("%s: needs kernel_shape with %d values", who(), r) end
  local s, d = list_or("strides", r, 1), list_or("dilations", r, 1)
  local dilated = false
  for i = 1, r do dilated = dilated or d[i] ~= 1 end
  local col_major = attr("storage_order", "i", 0) ~= 0   -- only how Indices are numbered
  local ceil = attr("ceil_mode", "i", 0) ~= 0
  local pb, pe = spatial_pads(x.shape, k, s, d)
  local avg = N.node.op == "AveragePool"
  local count_pad = attr("count_include_pad", "i", 0) ~= 0
  local shape = {x.shape[1], x.shape[2]}
  for i = 1, r do
    local ke = (k[i] - 1) * d[i] + 1          -- the dilated kernel's extent
    local span = x.shape[2 + i] + pb[i] + pe[i] - ke
    local o = span // s[i] + 1
    if ceil then
      o = -((-span) // s[i]) + 1
      if (o - 1) * s[i] >= x.shape[2 + i] + pb[i] then o = o - 1 end
      local extra = (o - 1) * s[i] + ke - (x.shape[2 + i] + pb[i] + pe[i])
      if extra > 0 then
        if avg and count_pad then
          fail("%s: ceil_mode with a partial last window and count_include_pad is not supported", who())
        end
        pe[i] = pe[i] + extra   -- max: padding never wins; average: excluded below (ratio of sums)
      end
    end
    if o < 1 then fail("%s: the kernel is larger than the padded input", who()) end
    shape[2 + i] = o
  end
  if r > 2 or dilated or indices then   -- Kiln's pools are 2-D and undilated: one slice per tap instead
    local xs = small_int and string.format("kiln.cast(%s, \"f32\")", ref(x)) or ref(x)
    C.pool_taps(x, xs, {k = k, s = s, d = d, pb = pb, pe = pe, shape = shape, avg = avg, count_pad = count_pad,
      indices = indices, col_major = col_major, to_i32 = small_int})
    return
  end
  local k2, s2 = two(k, r, 1), two(s, r, 1)
  local p4 = r == 1 and {0, pb[1], 0, pe[1]} or {pb[1], pb[2], pe[1], pe[2]}
  local xs = ref(x)
  if small_int then xs = string.format("kiln.cast(%s, \"f32\")", xs) end
  if r == 1 then xs = xs .. ":unsqueeze(2)" end
  -- Kiln's pools pad at most half the kernel; wider padding is an explicit pad first
  -- (with -inf for max, where padding never wins; with 0 when the average counts it).
  local wide = false
  for i = 1, 4 do wide = wide or p4[i] > k2[(i - 1) % 2 + 1] // 2 end
  local o = {"kernel = " .. ints_lua(k2)}
  if s2[1] ~= k2[1] or s2[2] ~= k2[2] then o[#o + 1] = "stride = " .. ints_lua(s2) end
  local e
  if wide and avg and not count_pad then
    -- an average over the valid elements only: the window sums of x padded with zeros
    -- divided by those of a ones mask padded likewise (both averages count the padding)
    local pads = string.format("{%d, %d, %d, %d}", p4[2], p4[4], p4[1], p4[3])
    local ones = string.format("kiln.full(%s, 1)", shape_lua(r == 1 and {x.shape[1], x.shape[2], 1, x.shape[3]} or x.shape))
    o[#o + 1] = "count_include_pad = true"
    local opts = table.concat(o, ", ")
    e = string.format("kiln.avgpool2d(kiln.pad(%s, %s), {%s}) / kiln.avgpool2d(kiln.pad(%s, %s), {%s})", xs, pads, opts,
      ones, pads, opts)
  else
    if wide then
      xs = string.format("kiln.pad(%s, {%d, %d, %d, %d}, \"constant\"%s)", xs, p4[2], p4[4], p4[1], p4[3],
        avg and "" or ", -math.huge")
      p4 = {0, 0, 0, 0}
    end
    if p4[1] ~= 0 or p4[2] ~= 0 or p4[3] ~= 0 or p4[4] ~= 0 then o[#o + 1] = "padding = " .. ints_lua(p4) end
    if avg then o[#o + 1] = "count_include_pad = " .. tostring(count_pad) end
    e = string.format("kiln.%s(%s, {%s})", avg and "avgpool2d" or "maxpool2d", xs, table.concat(o, ", "))
  end
  if r == 1 then e = e .. ":squeeze(2)" end
  if small_int then out(1, string.format("kiln.cast(%s, \"i32\")", e), shape, "i32") return end
  out(1, e, shape, "f32")
end)

op("GlobalAveragePool GlobalMaxPool", "", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local dims, shape = {}, {x.shape[1], x.shape[2]}
  for i = 3, #x.shape do dims[#dims + 1] = i - 1; shape[i] = 1 end
  local f = N.node.op == "GlobalAveragePool" and "mean" or "amax"
  out(1, string.format("kiln.%s(%s, %s, true)", f, ref(x), ints_lua(dims)), shape, "f32")
end)

-- ---- normalisations ----

op("BatchNormalization", "epsilon momentum spatial training_mode is_test", function()
  local x = need_input(1, "X")
  local sc, b, mean, var = need_input(2, "scale"), need_input(3, "B"), need_input(4, "mean"), need_input(5, "var")
  need_dt(x, "f32", "input X")
  -- opset < 7: is_test = 1 is inference (training_mode's 0); is_test = 0 a training step
  -- that also outputs saved statistics, which Kiln does not have
  if attr("is_test", "i", 1) ~= 1 then fail("%s: is_test = 0 (a training step, opset < 7) is not supported", who()) end
  local momentum = num(attr("momentum", "f", 0.9), "f32")
  if attr("spatial", "i", 1) ~= 1 then fail("%s: spatial = 0 is not supported", who()) end
  if attr("training_mode", "i", 0) ~= 0 then
    -- a training step: normalised by the batch's own statistics (over every dim but the
    -- channels, the variance without Bessel's correction), and the running statistics
    -- moved toward them by 1 - momentum. Deterministic, so it compiles like any op.
    if #x.shape < 2 then fail("%s: X needs a channel dim", who()) end
    local dims, cshape = {}, {}
    for d = 1, #x.shape do
      if d ~= 2 then dims[#dims + 1] = d - 1 end
      cshape[d] = d == 2 and x.shape[2] or 1
    end
    local m, v = lua_name(N.node.outputs[1] .. "_batch_mean"), lua_name(N.node.outputs[1] .. "_batch_var")
    line(string.format("%skiln.mean(%s, %s, true)  -- BatchNormalization: the batch mean per channel", C.assign(m), ref(x),
      ints_lua(dims)))
    line(string.format("%skiln.mean((%s - %s) * (%s - %s), %s, true)  -- BatchNormalization: the batch variance",
      C.assign(v), ref(x), bind(m), ref(x), bind(m), ints_lua(dims)))
    local eps = num(attr("epsilon", "f", 1e-5), "f32")
    out(1, string.format("(%s - %s) / kiln.sqrt(%s + %s) * %s:reshape(%s) + %s:reshape(%s)", ref(x), bind(m), bind(v), eps,
      ref(sc), shape_lua(cshape), ref(b), shape_lua(cshape)), x.shape, "f32")
    local c = {x.shape[2]}
    out(2, string.format("%s * %s + %s:reshape(%s) * (1 - %s)", ref(mean), momentum, bind(m), shape_lua(c), momentum), c, "f32")
    out(3, string.format("%s * %s + %s:reshape(%s) * (1 - %s)", ref(var), momentum, bind(v), shape_lua(c), momentum), c, "f32")
    return
  end
  only_outputs(1)
  out(1, string.format("kiln.batchnorm(%s, %s, %s, %s, %s, {eps = %s})", ref(x), ref(mean), ref(var), ref(sc), ref(b),
    num(attr("epsilon", "f", 1e-5), "f32")), x.shape, "f32")
end)

op("InstanceNormalization", "epsilon", function()
  local x, sc, b = need_input(1, "input"), need_input(2, "scale"), need_input(3, "B")
  need_dt(x, "f32", "input")
  out(1, string.format("kiln.group_norm(%s, %d, %s, %s, %s)", ref(x), x.shape[2], ref(sc), ref(b),
    num(attr("epsilon", "f", 1e-5), "f32")), x.shape, "f32")
end)

op("LayerNormalization", "axis epsilon stash_type", function()
  local x, sc, b = need_input(1, "X"), need_input(2, "Scale"), input(3)
  need_dt(x, "f32", "input X")
  attr("stash_type", "i", 1)
  local ax = axis_of(attr("axis", "i", -1), #x.shape, who())
  local dims = #x.shape - ax
  local eps = num(attr("epsilon", "f", 1e-5), "f32")
  out(1, string.format("kiln.layernorm(%s, %s, %s, {eps = %s, dims = %d})", ref(x), ref(sc), b and ref(b) or "nil",
    eps, dims), x.shape, "f32")
  -- Mean and InvStdDev, when asked for: over the normalised dims, kept as size 1.
  local list, shape = {}, {}
  for d = 0, #x.shape - 1 do
    if d >= ax then list[#list + 1] = d; shape[d + 1] = 1 else shape[d + 1] = x.shape[d + 1] end
  end
  local s, l = ref(x), ints_lua(list)
  local mean = string.format("kiln.mean(%s, %s, true)", s, l)
  if (N.node.outputs[2] or "") ~= "" then out(2, mean, copy(shape), "f32") end
  if (N.node.outputs[3] or "") ~= "" then
    out(3, string.format("kiln.rsqrt(kiln.mean((%s - %s) ^ 2, %s, true) + %s)", s, mean, l, eps), copy(shape), "f32")
  end
end)

op("LpNormalization", "axis p", function()
  local x = need_input(1, "input")
  need_dt(x, "f32", "input")
  local ax = axis_of(attr("axis", "i", -1), #x.shape, who())
  local p = attr("p", "i", 2)
  local e
  if p == 2 then e = string.format("%s / kiln.sqrt(kiln.sum(%s * %s, %d, true))", ref(x), ref(x), ref(x), ax)
  elseif p == 1 then e = string.format("%s / kiln.sum(kiln.abs(%s), %d, true)", ref(x), ref(x), ax)
  else fail("%s: p = %d (1 or 2 are supported)", who(), p) end
  out(1, e, x.shape, "f32")
end)

op("MeanVarianceNormalization", "axes", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local axes = attr("axes", "ints", {0, 2, 3})
  local s, a = ref(x), ints_lua(axes)
  out(1, string.format("(%s - kiln.mean(%s, %s, true)) / kiln.sqrt(kiln.mean(%s * %s, %s, true) - kiln.mean(%s, %s, true) ^ 2)",
    s, s, a, s, s, a, s, a), x.shape, "f32")
end)

op("Softmax LogSoftmax", "axis", function()
  local x = need_input(1, "input")
  need_dt(x, "f32", "input")
  local f = N.node.op == "Softmax" and "softmax" or "log_softmax"
  local r = #x.shape
  if opset >= 13 then
    out(1, string.format("kiln.%s(%s, %d)", f, ref(x), axis_of(attr("axis", "i", -1), r, who())), x.shape, "f32")
    return
  end
  local ax = r == 0 and 0 or axis_of(attr("axis", "i", 1), r, who())
  if ax == r - 1 then out(1, string.format("kiln.%s(%s, -1)", f, ref(x)), x.shape, "f32") return end
  local a, b = 1, 1
  for i = 1, r do if i <= ax then a = a * x.shape[i] else b = b * x.shape[i] end end
  out(1, string.format("kiln.%s(%s:reshape({%d, %d}), 1):reshape(%s)", f, ref(x), a, b, shape_lua(x.shape)), x.shape, "f32")
end)

-- ---- reductions ----

local reduce_expr = {
  ReduceSum = "kiln.sum(%s, %s, %s)", ReduceMean = "kiln.mean(%s, %s, %s)", ReduceMax = "kiln.amax(%s, %s, %s)",
  ReduceMin = "kiln.amin(%s, %s, %s)", ReduceL1 = "kiln.sum(kiln.abs(%s), %s, %s)",
  ReduceL2 = "kiln.sqrt(kiln.sum(%s * %1$s, %s, %s))", ReduceSumSquare = "kiln.sum(%s * %1$s, %s, %s)",
  ReduceLogSum = "kiln.log(kiln.sum(%s, %s, %s))",
}
op("ReduceSum ReduceMean ReduceMax ReduceMin ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum ReduceLogSumExp ReduceProd",
  "axes keepdims noop_with_empty_axes", function()
  local x = need_input(1, "data")
  need_dt(x, "f32", "input data")
  local o, r = N.node.op, #x.shape
  local axes
  if o == "ReduceSum" and opset >= 13 then axes = input(2) and const_input(2, "axes") or nil
  else axes = attr("axes", "ints", nil) end
  local keep = attr("keepdims", "i", 1) ~= 0
  if (not axes or #axes == 0) and attr("noop_with_empty_axes", "i", 0) ~= 0 then out(1, ref(x), x.shape, "f32") return end
  local set, dims = {}, {}
  if axes and #axes > 0 then for _, a in ipairs(axes) do set[axis_of(a, r, who())] = true end
  else for d = 0, r - 1 do set[d] = true end end
  local shape = {}
  for d = 0, r - 1 do
    if set[d] then dims[#dims + 1] = d; if keep then shape[#shape + 1] = 1 end
    else shape[#shape + 1] = x.shape[d + 1] end
  end
  local s, dl, ks = ref(x), ints_lua(dims), tostring(keep)
  local e
  if o == "ReduceProd" then
    e = string.format("kiln.prod(%s, %s, %s)", s, dl, ks)
  elseif o == "ReduceLogSumExp" then
    e = string.format("kiln.amax(%s, %s, true) + kiln.log(kiln.sum(kiln.exp(%s - kiln.amax(%s, %s, true)), %s, true))",
      s, dl, s, s, dl, dl)
    if not keep then e = string.format("(%s):reshape(%s)", e, shape_lua(shape)) end
  else
    e = reduce_expr[o]:gsub("%%1%$s", s)
    e = string.format(e, s, dl, ks)
  end
  out(1, e, shape, "f32")
end)

op("ArgMax ArgMin", "axis keepdims select_last_index", function()
  local x = need_input(1, "data")
  need_dt(x, "f32", "input data")
  local ax = axis_of(attr("axis", "i", 0), #x.shape, who())
  local keep = attr("keepdims", "i", 1) ~= 0
  local shape = {}
  for d = 0, #x.shape - 1 do
    if d ~= ax then shape[#shape + 1] = x.shape[d + 1] elseif keep then shape[#shape + 1] = 1 end
  end
  if attr("select_last_index", "i", 0) ~= 0 then   -- the last extreme is the first one of the reversed dim
    out(1, string.format("%d - kiln.%s(kiln.flip(%s, %d), %d, %s)", x.shape[ax + 1] - 1, N.node.op:lower(), ref(x), ax, ax,
      tostring(keep)), shape, "i32")
    return
  end
  out(1, string.format("kiln.%s(%s, %d, %s)", N.node.op:lower(), ref(x), ax, tostring(keep)), shape, "i32")
end)

op("CumSum", "exclusive reverse", function()
  local x = need_input(1, "x")
  need_dt(x, "f32", "input x")
  local ax = axis_of(scalar_input(2, "axis"), #x.shape, who())
  local s = ref(x)
  local rev = attr("reverse", "i", 0) ~= 0
  if rev then s = string.format("kiln.flip(%s, %d)", s, ax) end
  local e = string.format("kiln.cumsum(%s, %d)", s, ax)
  if attr("exclusive", "i", 0) ~= 0 then e = e .. " - " .. s end
  if rev then e = string.format("kiln.flip(%s, %d)", e, ax) end
  out(1, e, x.shape, "f32")
end)

op("Einsum", "equation", function()
  local eq = attr("equation", "s", nil)
  if not eq then fail("%s: needs an equation", who()) end
  eq = eq:gsub("%s", "")
  if eq:find("%.") then fail("%s: ellipsis ('...') in the equation is not supported", who()) end
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  lhs = lhs or eq
  local ins, sizes, count, refs = {}, {}, {}, {}
  local i = 0
  for term in (lhs .. ","):gmatch("([^,]*),") do
    i = i + 1
    local v = need_input(i, "operand")
    need_dt(v, "f32", "operand")
    if #term ~= #v.shape then fail("%s: term '%s' for an operand of rank %d", who(), term, #v.shape) end
    for j = 1, #term do
      local c = term:sub(j, j)
      sizes[c] = sizes[c] or v.shape[j]
      count[c] = (count[c] or 0) + 1
    end
    refs[i] = ref(v)
    ins[i] = v
  end
  if not rhs then
    local cs = {}
    for c, n in pairs(count) do if n == 1 then cs[#cs + 1] = c end end
    table.sort(cs)
    rhs = table.concat(cs)
  end
  local shape = {}
  for j = 1, #rhs do shape[j] = sizes[rhs:sub(j, j)] end
  out(1, string.format("kiln.einsum(%q, %s)", eq, table.concat(refs, ", ")), shape, "f32")
end)

op("Hardmax", "axis", function()
  local x = need_input(1, "input")
  need_dt(x, "f32", "input")
  if opset < 13 then fail("%s: Hardmax before opset 13 (flattened to 2-D) is not supported", who()) end
  local ax = axis_of(attr("axis", "i", -1), #x.shape, who())
  local ones = {}
  for d = 1, #x.shape do ones[d] = d == ax + 1 and x.shape[d] or 1 end
  out(1, string.format("kiln.cast(kiln.eq(kiln.argmax(%s, %d, true), kiln.arange(%d):reshape(%s)), \"f32\")", ref(x), ax,
    x.shape[ax + 1], shape_lua(ones)), x.shape, "f32")
end)

op("Shrink", "bias lambd", function()
  local x = need_input(1, "input")
  need_dt(x, "f32", "input")
  local b, l = num(attr("bias", "f", 0.0), "f32"), num(attr("lambd", "f", 0.5), "f32")
  local s = ref(x)
  out(1, string.format("kiln.where(%s:lt(-%s), %s + %s, kiln.where(%s:gt(%s), %s - %s, 0))", s, l, s, b, s, l, s, b),
    x.shape, "f32")
end)

op("EyeLike", "dtype k", function()
  local x = need_input(1, "input")
  if #x.shape ~= 2 then fail("%s: needs a 2-D input", who()) end
  local code = attr("dtype", "i", nil)
  local dt = code and kiln_dtype[code] or x.dt
  if not dt then fail("%s: dtype %s is not supported", who(), onnx_dtype_names[code] or tostring(code)) end
  fold_limit(numel(x.shape))
  local k, vals_ = attr("k", "i", 0), {}
  for i = 0, x.shape[1] - 1 do
    for j = 0, x.shape[2] - 1 do vals_[#vals_ + 1] = (j - i == k) and (dt == "f32" and 1.0 or 1) or (dt == "f32" and 0.0 or 0) end
  end
  out_const(1, vals_, copy(x.shape), dt)
end)

-- NegativeLogLikelihoodLoss on log-probabilities x [N, C, d...] and i32 targets [N, d...]:
-- -x[n, t, d...] * w[t], summed, averaged by the weights taken, or kept per element;
-- targets equal to ignore_index take weight 0 (and index 0, any valid one).
-- The sum of all elements of e (a tensor of shape), in two stages when it is long: the
-- generated C adds float32 in order, erring by up to K eps over K terms, so a loss over
-- thousands of positions sums its trailing dims first and then those partial sums
-- (about sqrt(K) terms each), near the pairwise sum numpy's reference takes.
local function total(e, shape)
  local n = numel(shape)
  if #shape < 2 or n <= 1024 then return string.format("kiln.sum(%s)", e) end
  local inner, dims = 1, {}
  for d = #shape, 2, -1 do
    if inner * shape[d] > math.sqrt(n) and #dims > 0 then break end
    inner = inner * shape[d]
    dims[#dims + 1] = d - 1
  end
  return string.format("kiln.sum(kiln.sum(%s, %s))", e, ints_lua(dims))
end

local function nll(xs, x, t, w, who_)
  local reduction = attr("reduction", "s", "mean")
  local ignore = attr("ignore_index", "i", nil)
  local ts = ref(t)
  local tsafe = ts
  if ignore then tsafe = string.format("kiln.where(%s:eq(%d), kiln.constant(0, nil, \"i32\"), %s)", ts, ignore, ts) end
  local picked = string.format("kiln.take_along_dim(%s, kiln.unsqueeze(%s, 1), 1):squeeze(1)", xs, tsafe)
  local wt
  if w then wt = string.format("kiln.gather(%s, %s, 0)", ref(w), tsafe) end
  if ignore then
    local keep = string.format("kiln.cast(%s:ne(%d), \"f32\")", ts, ignore)
    wt = wt and (wt .. " * " .. keep) or keep
  end
  local loss = wt and string.format("-%s * %s", picked, wt) or ("-" .. picked)
  local shape = copy(t.shape)
  if reduction == "none" then return loss, shape end
  if reduction == "sum" then return total(loss, shape), {} end
  if reduction ~= "mean" then fail("%s: reduction %q is not supported", who_, reduction) end
  if wt then return string.format("%s / %s", total(loss, shape), total(wt, shape)), {} end
  return string.format("kiln.mean(%s)", loss), {}
end

op("NegativeLogLikelihoodLoss", "ignore_index reduction", function()
  local x, t, w = need_input(1, "input"), need_input(2, "target"), input(3)
  need_dt(x, "f32", "input")
  need_dt(t, "i32", "target")
  local e, shape = nll(ref(x), x, t, w, who())
  out(1, e, shape, "f32")
end)

op("SoftmaxCrossEntropyLoss", "ignore_index reduction", function()
  local x, t, w = need_input(1, "scores"), need_input(2, "labels"), input(3)
  need_dt(x, "f32", "scores")
  need_dt(t, "i32", "labels")
  local lp = string.format("kiln.log_softmax(%s, 1)", ref(x))
  if (N.node.outputs[2] or "") ~= "" then
    out(2, lp, copy(x.shape), "f32")
    lp = vals[N.node.outputs[2]].ref
  end
  local e, shape = nll(lp, x, t, w, who())
  out(1, e, shape, "f32")
end)

-- ---- resampling ----

-- The 1-D resampling of ONNX's Resize as a matrix m[out][in] (a list of rows, each a
-- list of {index, coefficient}): for output i the source coordinate x from the
-- coordinate transformation, then the n taps around it (n = 2 for nearest and linear, 4
-- for cubic) at floor(x) - n/2 + 1 .. floor(x) + n/2 (an integral x counts as the right
-- end of the interval below it), taps outside the input take the edge value, or with
-- exclude_outside weight 0 and the others renormalised. This is the definition the ONNX
-- operator spec gives, so every mode is one table of coefficients.
local function resize_taps(n_in, n_out, scale, o)
  local rows = {}
  local width = scale * n_in                   -- ONNX uses the scaled (fractional) length
  for i = 0, n_out - 1 do
    local x
    local ct = o.coord
    if ct == "half_pixel" then x = (i + 0.5) / scale - 0.5
    elseif ct == "pytorch_half_pixel" then x = width > 1 and (i + 0.5) / scale - 0.5 or -0.5
    elseif ct == "align_corners" then x = width == 1 and 0 or i * (n_in - 1) / (width - 1)
    elseif ct == "asymmetric" then x = i / scale
    elseif ct == "tf_half_pixel_for_nn" then x = (i + 0.5) / scale
    elseif ct == "tf_crop_and_resize" then   -- the roi's [start, end] of this dim, stretched over the output
      x = n_out > 1 and o.start * (n_in - 1) + i * (o.stop - o.start) * (n_in - 1) / (n_out - 1)
        or 0.5 * (o.start + o.stop) * (n_in - 1)
    else fail("%s: coordinate_transformation_mode %q is not supported", who(), ct) end
    if ct == "tf_crop_and_resize" and (x < 0 or x > n_in - 1) then
      rows[i + 1] = {outside = true}           -- extrapolation_value, no taps
      goto continue
    end
    local base = math.floor(x)
    local r = x - base
    if r == 0 then base, r = base - 1, 1.0 end
    local c
    if o.mode == "nearest" then
      local m = o.nearest
      local right
      if r == 1 then right = true
      elseif m == "round_prefer_floor" then right = r > 0.5
      elseif m == "round_prefer_ceil" then right = r >= 0.5
      elseif m == "floor" then right = false
      elseif m == "ceil" then right = true
      else fail("%s: nearest_mode %q is not supported", who(), m) end
      c = right and {0, 1} or {1, 0}
    elseif o.mode == "linear" then c = {1 - r, r}
    else
      local a, q = o.a, 1 - r
      c = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
           ((a + 2) * q - (a + 3)) * q * q + 1, ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a}
    end
    local first = base - #c // 2 + 1
    if o.exclude then
      local sum = 0
      for t = 1, #c do
        local j = first + t - 1
        if j < 0 or j >= n_in then c[t] = 0 end
        sum = sum + c[t]
      end
      for t = 1, #c do c[t] = c[t] / sum end
    end
    local row = {}
    for t = 1, #c do
      if c[t] ~= 0 then row[#row + 1] = {math.max(0, math.min(n_in - 1, first + t - 1)), c[t]} end
    end
    rows[i + 1] = row
    ::continue::
  end
  return rows
end

op("Resize Upsample", "antialias coordinate_transformation_mode cubic_coeff_a exclude_outside extrapolation_value " ..
  "keep_aspect_ratio_policy mode nearest_mode scales", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local r = #x.shape
  local o = {mode = attr("mode", "s", "nearest"), coord = attr("coordinate_transformation_mode", "s", "half_pixel"),
    nearest = attr("nearest_mode", "s", "round_prefer_floor"), a = attr("cubic_coeff_a", "f", -0.75),
    exclude = attr("exclude_outside", "i", 0) ~= 0}
  if attr("antialias", "i", 0) ~= 0 then fail("%s: antialias is not supported", who()) end
  if attr("keep_aspect_ratio_policy", "s", "stretch") ~= "stretch" then fail("%s: keep_aspect_ratio_policy is not supported", who()) end
  local extra = attr("extrapolation_value", "f", 0.0)
  local roi
  if o.coord == "tf_crop_and_resize" then
    roi = input(2) and const_input(2, "roi")
    if not roi or #roi ~= 2 * r then fail("%s: tf_crop_and_resize needs a roi of %d values", who(), 2 * r) end
  end
  if o.mode ~= "nearest" and o.mode ~= "linear" and o.mode ~= "cubic" then fail("%s: mode %q is not supported", who(), o.mode) end
  local scales, sizes
  if N.node.op == "Upsample" then
    if opset < 9 then scales = attr("scales", "floats", nil) else scales = const_input(2, "scales") end
  elseif opset < 11 then scales = const_input(2, "scales")
  else
    scales = input(3) and const_input(3, "scales") or nil
    sizes = input(4) and const_input(4, "sizes") or nil
  end
  if scales and #scales == 0 then scales = nil end   -- an empty scales tensor stands for "absent"
  if (scales and #scales ~= r) or (sizes and #sizes ~= r) or not (scales or sizes) then
    fail("%s: needs %d scales or sizes", who(), r)
  end
  local shape, e = {}, ref(x)
  for d = 1, r do
    local n_in = x.shape[d]
    local n_out = sizes and sizes[d] or math.floor(n_in * scales[d] + 0.0)
    local scale = sizes and n_out / n_in or scales[d]
    if n_out < 1 then fail("%s: an empty output (Kiln has no empty tensors)", who()) end
    shape[d] = math.tointeger(n_out)
    if roi then o.start, o.stop = roi[d], roi[r + d] end
    if not (n_out == n_in and scale == 1) or (roi and (o.start ~= 0 or o.stop ~= 1)) then
      local rows = resize_taps(n_in, n_out, scale, o)
      if d < r - 1 then fail("%s: resizing dim %d is not supported (only the last two dims)", who(), d - 1) end
      -- the rows outside the roi's input take extrapolation_value: a mask of them, shaped
      -- to broadcast along dim d
      local outside, any = {}, false
      for i, row in ipairs(rows) do outside[i] = row.outside and 1 or 0; any = any or row.outside end
      local mshape = d == r and {n_out} or {n_out, 1}
      if o.mode == "nearest" then   -- a gather: exact
        local idx = {}
        for i, row in ipairs(rows) do idx[i] = row.outside and 0 or row[1][1] end
        local iv = ref({shape = {n_out}, dt = "i32", k = idx, name = N.node.outputs[1] .. "_index" .. (d - 1)})
        e = string.format("kiln.gather(%s, %s, %d)", e, iv, d - 1)
        if any then
          local mv = ref({shape = mshape, dt = "bool", k = outside, name = N.node.outputs[1] .. "_outside" .. (d - 1)})
          e = string.format("kiln.where(%s, %s, %s)", mv, num(extra, "f32"), e)
        end
      else                          -- a product with the interpolation matrix
        fold_limit(n_out * n_in)
        local k = {}
        for i = 1, n_out * n_in do k[i] = 0.0 end
        for i, row in ipairs(rows) do
          for _, t in ipairs(row) do k[(i - 1) * n_in + t[1] + 1] = k[(i - 1) * n_in + t[1] + 1] + t[2] end
        end
        local mv = ref({shape = {n_out, n_in}, dt = "f32", k = k, name = N.node.outputs[1] .. "_weights" .. (d - 1)})
        if d == r then e = string.format("kiln.matmul(%s, %s, {trans_b = true})", e, mv)
        else e = string.format("kiln.matmul(%s, %s)", mv, e) end
        if any then   -- those rows have no taps (0): the value added instead
          local b = {}
          for i = 1, n_out do b[i] = outside[i] * extra end
          local bv = ref({shape = mshape, dt = "f32", k = b, name = N.node.outputs[1] .. "_outside" .. (d - 1)})
          e = string.format("%s + %s", e, bv)
        end
      end
    end
  end
  out(1, e, shape, "f32")
end)

op("ConvTranspose", "auto_pad dilations group kernel_shape output_padding output_shape pads strides", function()
  local x, w, b = need_input(1, "X"), need_input(2, "W"), input(3)
  need_dt(x, "f32", "input X")
  local r = #x.shape - 2
  if r ~= 1 and r ~= 2 then fail("%s: %d-D transposed convolution is not supported (1-D and 2-D are)", who(), r) end
  local g = attr("group", "i", 1)
  local k = {}
  for i = 1, r do k[i] = w.shape[2 + i] end
  local ks = attr("kernel_shape", "ints", nil)
  if ks then for i = 1, r do if ks[i] ~= k[i] then fail("%s: kernel_shape disagrees with W", who()) end end end
  local s, d = list_or("strides", r, 1), list_or("dilations", r, 1)
  local op_ = list_or("output_padding", r, 0)
  local oshape = attr("output_shape", "ints", nil)
  local auto = attr("auto_pad", "s", "NOTSET")
  local pads = attr("pads", "ints", nil)
  if pads and #pads ~= 2 * r then fail("%s: %d pads for %d spatial dims", who(), #pads, r) end
  if oshape and #oshape < r then fail("%s: output_shape has %d values for %d spatial dims", who(), #oshape, r) end
  if g < 1 or x.shape[2] % g ~= 0 then fail("%s: group %d does not divide %d channels", who(), g, x.shape[2]) end
  local pb, pe, shape = {}, {}, {x.shape[1], w.shape[2] * g}
  for i = 1, r do
    local n = x.shape[2 + i]
    local target = oshape and oshape[#oshape - r + i] or ((auto == "SAME_UPPER" or auto == "SAME_LOWER") and n * s[i])
    if target then   -- pads from the output size asked for (ONNX's rule for the odd one)
      local total = s[i] * (n - 1) + op_[i] + (k[i] - 1) * d[i] + 1 - target
      if auto == "SAME_UPPER" then pb[i], pe[i] = total // 2, total - total // 2
      else pb[i], pe[i] = total - total // 2, total // 2 end
    else
      pb[i], pe[i] = pads and pads[i] or 0, pads and pads[r + i] or 0
    end
    shape[2 + i] = (n - 1) * s[i] - pb[i] - pe[i] + d[i] * (k[i] - 1) + 1 + op_[i]
    if shape[2 + i] < 1 then fail("%s: an empty output", who()) end
  end
  -- a negative pad (an output_shape past the full result) extends the output with zeros
  -- (then the bias): the transposed convolution reaches no further
  local ext = {}
  for i = 1, r do
    ext[i], ext[r + i] = math.max(0, -pb[i]), math.max(0, -pe[i])
    pb[i], pe[i] = math.max(0, pb[i]), math.max(0, pe[i])
  end
  local extend = false
  for i = 1, 2 * r do extend = extend or ext[i] > 0 end
  if x.shape[2] ~= w.shape[1] then fail("%s: X has %d channels, W %d", who(), x.shape[2], w.shape[1]) end
  local xs, ws = ref(x), ref(w)
  if r == 1 then xs, ws = xs .. ":unsqueeze(2)", ws .. ":unsqueeze(2)" end
  local s2, d2, o2 = two(s, r, 1), two(d, r, 1), two(op_, r, 0)
  local pb2, pe2 = two(pb, r, 0), two(pe, r, 0)
  local opts = {}
  if s2[1] ~= 1 or s2[2] ~= 1 then opts[#opts + 1] = "stride = " .. ints_lua(s2) end
  if pb2[1] ~= 0 or pb2[2] ~= 0 or pe2[1] ~= 0 or pe2[2] ~= 0 then
    opts[#opts + 1] = string.format("padding = {%d, %d, %d, %d}", pb2[1], pb2[2], pe2[1], pe2[2])
  end
  if o2[1] ~= 0 or o2[2] ~= 0 then opts[#opts + 1] = "output_padding = " .. ints_lua(o2) end
  if d2[1] ~= 1 or d2[2] ~= 1 then opts[#opts + 1] = "dilation = " .. ints_lua(d2) end
  if g ~= 1 then opts[#opts + 1] = "groups = " .. g end
  local e = string.format("kiln.conv_transpose2d(%s, %s%s%s)", xs, ws, (b and not extend) and (", " .. ref(b)) or "",
    #opts > 0 and (", {" .. table.concat(opts, ", ") .. "}") or "")
  if r == 1 then e = e .. ":squeeze(2)" end
  if extend then
    local t = {}
    for i = r, 1, -1 do t[#t + 1] = ext[i]; t[#t + 1] = ext[r + i] end
    e = string.format("kiln.pad(%s, %s)", e, ints_lua(t))
    if b then e = string.format("%s + %s:reshape(%s)", e, ref(b), r == 1 and string.format("{%d, 1}", b.shape[1]) or string.format("{%d, 1, 1}", b.shape[1])) end
  end
  out(1, e, shape, "f32")
end)

op("LRN", "alpha beta bias size", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  if #x.shape ~= 4 then fail("%s: needs a 4-D input", who()) end
  local size = attr("size", "i", nil)
  if not size or size < 1 or size > 64 then fail("%s: size must be 1 to 64", who()) end
  local alpha, beta, bias = attr("alpha", "f", 0.0001), attr("beta", "f", 0.75), attr("bias", "f", 1.0)
  local lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
  local c = x.shape[2]
  local s = ref(x)
  -- the sum of squares over a window of channels: a padded sum along C
  local sq = string.format("kiln.sum(kiln.stack({%s}, 0), 0)", (function()
    local t = {}
    for j = 0, size - 1 do
      t[#t + 1] = string.format("kiln.pad(%s * %s, {0, 0, 0, 0, %d, %d}):slice(1, %d, %d)", s, s, lo, hi, j, j + c)
    end
    return table.concat(t, ", ")
  end)())
  out(1, string.format("%s / (%s + %s * %s) ^ %s", s, num(bias, "f32"), num(alpha / size, "f32"), sq, num(beta, "f32")),
    x.shape, "f32")
end)

-- ---- recurrent layers ----

-- RNN, GRU and LSTM as a Lua loop in the script: the input projection of every step in
-- one matmul, then the gates step by step in ONNX's equations and gate order (LSTM i o f
-- c, GRU z r h), per direction. The tracer unrolls the loop. Variable sequence lengths,
-- clip and input_forget are refused.
local rnn_gates = {RNN = 1, GRU = 3, LSTM = 4}
local rnn_default_acts = {RNN = {"Tanh"}, GRU = {"Sigmoid", "Tanh"}, LSTM = {"Sigmoid", "Tanh", "Tanh"}}
local rnn_act_fn = {Sigmoid = "kiln.sigmoid", Tanh = "kiln.tanh", Relu = "kiln.relu"}

local function recurrent()
  local kind = N.node.op
  local x, w, r, b = need_input(1, "X"), need_input(2, "W"), need_input(3, "R"), input(4)
  local h0, c0, p = input(6), kind == "LSTM" and input(7) or nil, kind == "LSTM" and input(8) or nil
  need_dt(x, "f32", "input X")
  local hs = attr("hidden_size", "i", nil)
  if not hs or hs < 1 then fail("%s: needs hidden_size", who()) end
  local dir = attr("direction", "s", "forward")
  local dirs = dir == "bidirectional" and 2 or 1
  if dir ~= "forward" and dir ~= "reverse" and dir ~= "bidirectional" then fail("%s: direction %q", who(), dir) end
  local layout = attr("layout", "i", 0)
  if attr("clip", "f", nil) then fail("%s: clip is not supported", who()) end
  if attr("input_forget", "i", 0) ~= 0 then fail("%s: input_forget is not supported", who()) end
  if attr("activation_alpha", "floats", nil) or attr("activation_beta", "floats", nil) then
    fail("%s: activation_alpha/beta are not supported", who())
  end
  local acts = attr("activations", "strings", nil)
  local na = #rnn_default_acts[kind]
  local fn = {}
  for d = 1, dirs do
    fn[d] = {}
    for j = 1, na do
      local a = acts and acts[(d - 1) * na + j] or rnn_default_acts[kind][j]
      fn[d][j] = rnn_act_fn[a] or fail("%s: activation %q is not supported", who(), tostring(a))
    end
  end
  local lbr = kind == "GRU" and attr("linear_before_reset", "i", 0) ~= 0
  local seq, batch = x.shape[layout == 0 and 1 or 2], x.shape[layout == 0 and 2 or 1]
  if input(5) then
    for _, l in ipairs(const_input(5, "sequence_lens")) do
      if l ~= seq then fail("%s: sequence_lens shorter than the sequence are not supported", who()) end
    end
  end
  local G = rnn_gates[kind]
  -- constants the block reads are declared before it: a local inside would end with it
  for _, v in ipairs({x, w, r, b or x, h0 or x, c0 or x, p or x}) do ref(v) end
  local ids, decl = {}, {}
  for i = 1, (kind == "LSTM" and 3 or 2) do
    local o = N.node.outputs[i]
    if o and o ~= "" then ids[i] = lua_name(o); decl[#decl + 1] = ids[i] end
  end
  if not use_table and #decl > 0 then line("local " .. table.concat(decl, ", ")) end
  local label = N.node.name ~= "" and (" " .. N.node.name:gsub("%c", "?")) or ""
  line(string.format("do  -- %s%s: unrolled over %d time steps, %s, gates in ONNX's order (%s)", kind, label, seq,
    dir, ({RNN = "i", GRU = "z r h", LSTM = "i o f c"})[kind]))
  local xs = ref(x)
  if layout ~= 0 then xs = xs .. ":transpose(0, 1)" end
  local ys, hl, cl = {}, {}, {}
  for d = 0, dirs - 1 do
    local f, g, hf = fn[d + 1][1], fn[d + 1][2], fn[d + 1][3]
    local function L(fmt, ...) line("  " .. string.format(fmt, ...)) end
    -- the block's names, taken like the graph's (no clash with an ONNX value's name)
    local nm = {}
    for _, k in ipairs({"w", "r", "wb", "rb", "xw", "h", "c", "p", "ys"}) do nm[k] = lua_name(k .. d) end
    L("local %s, %s = %s:select(0, %d), %s:select(0, %d)", nm.w, nm.r, ref(w), d, ref(r), d)
    local xw = string.format("kiln.matmul(%s, %s, {trans_b = true})", xs, nm.w)
    local rb = nil
    if b then
      L("local %s, %s = %s:select(0, %d):slice(0, 0, %d), %s:select(0, %d):slice(0, %d, %d)", nm.wb, nm.rb, ref(b), d,
        G * hs, ref(b), d, G * hs, 2 * G * hs)
      if kind == "GRU" then xw = xw .. " + " .. nm.wb; rb = nm.rb
      else xw = xw .. string.format(" + %s + %s", nm.wb, nm.rb) end
    end
    L("local %s = %s  -- every step's input projection", nm.xw, xw)
    local hinit = h0 and string.format("%s:select(0, %d)", ref(h0), d) or string.format("kiln.zeros({%d, %d})", batch, hs)
    L("local %s = %s", nm.h, hinit)
    if kind == "LSTM" then
      L("local %s = %s", nm.c, c0 and string.format("%s:select(0, %d)", ref(c0), d) or string.format("kiln.zeros({%d, %d})", batch, hs))
      if p then L("local %s = %s:select(0, %d)", nm.p, ref(p), d) end
    end
    L("local %s = {}", nm.ys)
    local rev = (dir == "reverse") or d == 1
    L(rev and "for t = %d, 0, -1 do" or "for t = 0, %d do", seq - 1)
    local function gate(j) return string.format("g:slice(1, %d, %d)", (j - 1) * hs, j * hs) end
    local h, c, pp = nm.h, nm.c, nm.p
    if kind == "RNN" then
      L("  %s = %s(%s:select(0, t) + kiln.matmul(%s, %s, {trans_b = true}))", h, f, nm.xw, h, nm.r)
    elseif kind == "GRU" then
      L("  local x_t = %s:select(0, t)", nm.xw)
      L("  local g = kiln.matmul(%s, %s:slice(0, 0, %d), {trans_b = true})%s", h, nm.r, 2 * hs,
        rb and string.format(" + %s:slice(0, 0, %d)", rb, 2 * hs) or "")
      L("  local z = %s(x_t:slice(1, 0, %d) + %s)", f, hs, gate(1))
      L("  local rt = %s(x_t:slice(1, %d, %d) + %s)", f, hs, 2 * hs, gate(2))
      local rh = string.format("%s:slice(0, %d, %d)", nm.r, 2 * hs, 3 * hs)
      local rbh = rb and string.format(" + %s:slice(0, %d, %d)", rb, 2 * hs, 3 * hs) or ""
      if lbr then
        L("  local n = %s(x_t:slice(1, %d, %d) + rt * (kiln.matmul(%s, %s, {trans_b = true})%s))", g, 2 * hs, 3 * hs, h, rh, rbh)
      else
        L("  local n = %s(x_t:slice(1, %d, %d) + kiln.matmul(rt * %s, %s, {trans_b = true})%s)", g, 2 * hs, 3 * hs, h, rh, rbh)
      end
      L("  %s = (1 - z) * n + z * %s", h, h)
    else
      L("  local g = %s:select(0, t) + kiln.matmul(%s, %s, {trans_b = true})", nm.xw, h, nm.r)
      local pi = p and string.format(" + %s:slice(0, 0, %d) * %s", pp, hs, c) or ""
      local pf = p and string.format(" + %s:slice(0, %d, %d) * %s", pp, 2 * hs, 3 * hs, c) or ""
      L("  local i = %s(%s%s)", f, gate(1), pi)
      L("  local f = %s(%s%s)", f, gate(3), pf)
      L("  %s = f * %s + i * %s(%s)", c, c, g, gate(4))
      local po = p and string.format(" + %s:slice(0, %d, %d) * %s", pp, hs, 2 * hs, c) or ""
      L("  local o = %s(%s%s)", f, gate(2), po)
      L("  %s = o * %s(%s)", h, hf, c)
    end
    L("  %s[t + 1] = %s", nm.ys, h)
    L("end")
    ys[#ys + 1] = string.format("kiln.stack(%s, 0)", nm.ys)
    hl[#hl + 1], cl[#cl + 1] = h, c
  end
  local yshape, hshape = {seq, dirs, batch, hs}, {dirs, batch, hs}
  local ye = string.format("kiln.stack({%s}, 1)", table.concat(ys, ", "))
  local he = string.format("kiln.stack({%s}, 0)", table.concat(hl, ", "))
  local ce = string.format("kiln.stack({%s}, 0)", table.concat(cl, ", "))
  if layout ~= 0 then
    ye, yshape = ye .. ":permute({2, 0, 1, 3})", {batch, seq, dirs, hs}
    he, ce, hshape = he .. ":transpose(0, 1)", ce .. ":transpose(0, 1)", {batch, dirs, hs}
  end
  local exprs, shapes = {ye, he, ce}, {yshape, hshape, hshape}
  for i = 1, 3 do
    if ids[i] then
      line(string.format("  %s = %s", bind(ids[i]), exprs[i]))
      vals[N.node.outputs[i]] = {shape = shapes[i], dt = "f32", ref = bind(ids[i]), name = N.node.outputs[i]}
    end
  end
  line("end")
end
op("RNN GRU LSTM", "activation_alpha activation_beta activations clip direction hidden_size input_forget layout " ..
  "linear_before_reset", recurrent)

-- TopK: Kiln's topk (always sorted; equal values by index, as ONNX orders them).
op("TopK", "axis largest sorted", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local k = math.tointeger(scalar_input(2, "K"))
  local ax = axis_of(attr("axis", "i", -1), #x.shape, who())
  local n = x.shape[ax + 1]
  if not k or k < 1 or k > n then fail("%s: K = %s must be between 1 and the dim's %d", who(), tostring(k), n) end
  attr("sorted", "i", 1)   -- sorted either way: an unsorted order is any order
  local largest = attr("largest", "i", 1) ~= 0
  local shape = copy(x.shape)
  shape[ax + 1] = k
  local names = {}
  for i = 1, 2 do names[i] = lua_name((N.node.outputs[i] or "") ~= "" and N.node.outputs[i] or "unused") end
  local lhs = use_table and (bind(names[1]) .. ", " .. bind(names[2]) .. " = ") or ("local " .. names[1] .. ", " .. names[2] .. " = ")
  line(string.format("%skiln.topk(%s, %d, %d, %s)  -- TopK%s", lhs, ref(x), k, ax, tostring(largest),
    N.node.name ~= "" and (" " .. N.node.name:gsub("%c", "?")) or ""))
  local dts = {"f32", "i32"}
  for i = 1, 2 do
    local o = N.node.outputs[i]
    if o and o ~= "" then vals[o] = {shape = copy(shape), dt = dts[i], ref = bind(names[i]), name = o} end
  end
end)

-- The cosine and sine matrices [n, m] of a DFT of length n keeping m bins, as values.
local function dft_matrices(n, m, base)
  fold_limit(n * m)
  local ck, sk = {}, {}
  for t = 0, n - 1 do
    for k = 0, m - 1 do
      local a = 2 * math.pi * ((t * k) % n) / n
      ck[#ck + 1], sk[#sk + 1] = math.cos(a), math.sin(a)
    end
  end
  return ref({shape = {n, m}, dt = "f32", k = ck, name = base .. "_cos"}),
    ref({shape = {n, m}, dt = "f32", k = sk, name = base .. "_sin"})
end

-- DFT as products with constant cosine and sine matrices along the signal axis:
-- (xr + i xi) e^(-i 2 pi t k / n) = (xr C + xi S) + i (xi C - xr S), C[t][k] = cos(2 pi t k / n),
-- S likewise with sin; the inverse flips the sign of S and divides by n.
op("DFT", "axis inverse onesided", function()
  local x = need_input(1, "input")
  need_dt(x, "f32", "input")
  if input(2) then fail("%s: the dft_length input is not supported", who()) end
  local r = #x.shape
  local parts = x.shape[r]
  if parts ~= 1 and parts ~= 2 then fail("%s: the last dim must be 1 (real) or 2 (complex), is %d", who(), parts) end
  local ax = attr("axis", "i", 1)
  if ax < 0 then ax = ax + r end
  if ax < 1 or ax >= r - 1 then fail("%s: axis %d is not a signal dim", who(), ax) end
  local inv, onesided = attr("inverse", "i", 0) ~= 0, attr("onesided", "i", 0) ~= 0
  if inv and onesided then fail("%s: inverse with onesided is not supported", who()) end
  local n = x.shape[ax + 1]
  local m = onesided and n // 2 + 1 or n
  local cv, sv = dft_matrices(n, m, N.node.outputs[1])
  -- the signal axis last (rank r - 1 once the real/imaginary dim is selected)
  local perm = {}
  for d = 0, r - 2 do if d ~= ax then perm[#perm + 1] = d end end
  perm[#perm + 1] = ax
  local back = {}
  for i, d in ipairs(perm) do back[d + 1] = i - 1 end
  local s = ref(x)
  local xr = string.format("%s:select(%d, 0):permute(%s)", s, r - 1, ints_lua(perm))
  local xi = parts == 2 and string.format("%s:select(%d, 1):permute(%s)", s, r - 1, ints_lua(perm)) or nil
  local function mm(a, b) return string.format("kiln.matmul(%s, %s)", a, b) end
  local re, im
  if not inv then
    re = xi and (mm(xr, cv) .. " + " .. mm(xi, sv)) or mm(xr, cv)
    im = xi and (mm(xi, cv) .. " - " .. mm(xr, sv)) or ("-" .. mm(xr, sv))
  else
    re = xi and ("(" .. mm(xr, cv) .. " - " .. mm(xi, sv) .. ") / " .. n) or (mm(xr, cv) .. " / " .. n)
    im = xi and ("(" .. mm(xi, cv) .. " + " .. mm(xr, sv) .. ") / " .. n) or (mm(xr, sv) .. " / " .. n)
  end
  local shape = copy(x.shape)
  shape[ax + 1], shape[r] = m, 2
  out(1, string.format("kiln.stack({(%s):permute(%s), (%s):permute(%s)}, %d)", re, ints_lua(back), im, ints_lua(back), r - 1),
    shape, "f32")
end)

-- STFT: the frames (slices every frame_step), times the window, through the DFT's cosine
-- and sine products (real signals).
op("STFT", "onesided", function()
  local x = need_input(1, "signal")
  need_dt(x, "f32", "signal")
  if #x.shape ~= 3 or x.shape[3] ~= 1 then fail("%s: only real signals [batch, n, 1] are supported", who()) end
  local step = math.tointeger(scalar_input(2, "frame_step"))
  local win = input(3)
  local len = input(4) and math.tointeger(scalar_input(4, "frame_length")) or (win and win.shape[1])
  if not step or step < 1 or not len or len < 1 or len > x.shape[2] then fail("%s: bad frame_step or frame_length", who()) end
  if win and (#win.shape ~= 1 or win.shape[1] ~= len) then fail("%s: the window must hold frame_length values", who()) end
  local onesided = attr("onesided", "i", 1) ~= 0
  local m = onesided and len // 2 + 1 or len
  local nf = (x.shape[2] - len) // step + 1
  local cv, sv = dft_matrices(len, m, N.node.outputs[1])
  local s, ws = ref(x), win and ref(win) or nil
  local id, fr = lua_name(N.node.outputs[1]), lua_name("frames")
  if not use_table then line("local " .. id) end
  line(string.format("do  -- STFT%s: %d frames of %d samples every %d, each a DFT by cosine and sine products",
    N.node.name ~= "" and (" " .. N.node.name:gsub("%c", "?")) or "", nf, len, step))
  line(string.format("  local %s = {}", fr))
  line(string.format("  for f = 0, %d do %s[f + 1] = %s:select(2, 0):slice(1, f * %d, f * %d + %d) end", nf - 1, fr, s, step, step, len))
  local xw = lua_name("windowed")
  line(string.format("  local %s = kiln.stack(%s, 1)%s", xw, fr, ws and (" * " .. ws) or ""))
  line(string.format("  %s = kiln.stack({kiln.matmul(%s, %s), -kiln.matmul(%s, %s)}, 3)", bind(id), xw, cv, xw, sv))
  line("end")
  vals[N.node.outputs[1]] = {shape = {x.shape[1], nf, m, 2}, dt = "f32", ref = bind(id), name = N.node.outputs[1]}
end)

-- Det of 2 x 2 and 3 x 3 matrices by their cofactor formulas.
op("Det", "", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  local r = #x.shape
  local n = x.shape[r]
  if r < 2 or x.shape[r - 1] ~= n or n > 3 then fail("%s: only 1 x 1 to 3 x 3 matrices are supported", who()) end
  local s = ref(x)
  local function e(i, j) return string.format("%s:select(%d, %d):select(%d, %d)", s, r - 1, j, r - 2, i) end
  local expr
  if n == 1 then expr = e(0, 0)
  elseif n == 2 then expr = string.format("%s * %s - %s * %s", e(0, 0), e(1, 1), e(0, 1), e(1, 0))
  else
    expr = string.format("%s * (%s * %s - %s * %s) - %s * (%s * %s - %s * %s) + %s * (%s * %s - %s * %s)",
      e(0, 0), e(1, 1), e(2, 2), e(1, 2), e(2, 1), e(0, 1), e(1, 0), e(2, 2), e(1, 2), e(2, 0),
      e(0, 2), e(1, 0), e(2, 1), e(1, 1), e(2, 0))
  end
  local shape = {}
  for d = 1, r - 2 do shape[d] = x.shape[d] end
  out(1, expr, shape, "f32")
end)

-- GridSample (bilinear, nearest, bicubic; zeros, border or reflection padding): grid
-- coordinates to pixel coordinates, then each tap a gather from the image flattened over
-- H x W, weighted, and zero outside the image (zeros padding; border and reflection
-- padding move the coordinates inside first).
op("GridSample", "align_corners mode padding_mode", function()
  local x, grid = need_input(1, "X"), need_input(2, "grid")
  need_dt(x, "f32", "input X")
  need_dt(grid, "f32", "grid")
  if #x.shape ~= 4 or #grid.shape ~= 4 or grid.shape[4] ~= 2 or grid.shape[1] ~= x.shape[1] then
    fail("%s: needs X [N, C, H, W] and grid [N, Ho, Wo, 2]", who())
  end
  local mode, pad = attr("mode", "s", "bilinear"), attr("padding_mode", "s", "zeros")
  local align = attr("align_corners", "i", 0) ~= 0
  if mode ~= "bilinear" and mode ~= "nearest" and mode ~= "bicubic" then fail("%s: mode %q is not supported", who(), mode) end
  if pad ~= "zeros" and pad ~= "border" and pad ~= "reflection" then fail("%s: padding_mode %q is not supported", who(), pad) end
  local n, c, h, w = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local ho, wo = grid.shape[2], grid.shape[3]
  local xs, gs = ref(x), ref(grid)
  local id = lua_name(N.node.outputs[1])
  local nm = {tap = lua_name("tap"), ix = lua_name("ix"), iy = lua_name("iy"), flat = lua_name("flat")}
  if not use_table then line("local " .. id) end
  line(string.format("do  -- GridSample%s: %s, %s padding, align_corners %d", N.node.name ~= "" and (" " .. N.node.name:gsub("%c", "?")) or "",
    mode, pad, align and 1 or 0))
  local function un(g, size)   -- a normalised coordinate in [-1, 1] to pixels
    if align then return string.format("(%s + 1) / 2 * %d", g, size - 1) end
    return string.format("((%s + 1) * %d - 1) / 2", g, size)
  end
  line(string.format("  local %s, %s = %s, %s", nm.ix, nm.iy, un(gs .. ":select(3, 0)", w), un(gs .. ":select(3, 1)", h)))
  if pad == "border" then
    line(string.format("  %s, %s = kiln.clamp(%s, 0, %d), kiln.clamp(%s, 0, %d)", nm.ix, nm.iy, nm.ix, w - 1, nm.iy, h - 1))
  elseif pad == "reflection" then
    -- folded back into [lo, hi] (the pixel centres' span with align_corners, else the
    -- pixels' edges) as often as needed, then clamped like border
    local rf = lua_name("reflect")
    line(string.format("  local function %s(c, lo, hi, size)", rf))
    line("    local span = hi - lo")
    line("    local d = kiln.abs(c - lo)")
    line("    local flips = kiln.floor(d / span)")
    line("    local extra = d - flips * span")
    line("    local even = (flips - kiln.floor(flips / 2) * 2):eq(0)")
    line("    return kiln.clamp(kiln.where(even, extra + lo, hi - extra), 0, size - 1)")
    line("  end")
    local lo, hw, hh = align and 0 or -0.5, align and w - 1 or w - 0.5, align and h - 1 or h - 0.5
    line(string.format("  %s, %s = %s(%s, %s, %s, %d), %s(%s, %s, %s, %d)", nm.ix, nm.iy, rf, nm.ix, num(lo, "f32"), num(hw, "f32"), w,
      rf, nm.iy, num(lo, "f32"), num(hh, "f32"), h))
  end
  line(string.format("  local %s = %s:reshape({%d, %d, %d})", nm.flat, xs, n, c, h * w))
  line(string.format("  local function %s(py, px, weight)   -- pixel (py, px) of every output place, times weight; 0 outside", nm.tap))
  line(string.format("    local inside = kiln.cast(px:ge(0), \"f32\") * kiln.cast(px:le(%d), \"f32\") * kiln.cast(py:ge(0), \"f32\") * " ..
    "kiln.cast(py:le(%d), \"f32\")", w - 1, h - 1))
  line(string.format("    local index = (kiln.clamp(py, 0, %d) * %d + kiln.clamp(px, 0, %d)):reshape({%d, 1, %d})", h - 1, w, w - 1, n, ho * wo))
  line(string.format("    local v = kiln.take_along_dim(%s, kiln.cast(kiln.expand(index, {%d, %d, %d}), \"i32\"), 2)", nm.flat, n, c, ho * wo))
  line(string.format("    return v:reshape({%d, %d, %d, %d}) * (weight * inside):unsqueeze(1)", n, c, ho, wo))
  line("  end")
  if mode == "nearest" then
    line(string.format("  %s = %s(kiln.round(%s), kiln.round(%s), 1)", bind(id), nm.tap, nm.iy, nm.ix))
  elseif mode == "bicubic" then
    -- 4 x 4 taps around floor(c), weights from the cubic convolution kernel (a = -0.75)
    local cw, x0, y0 = lua_name("cubic_weights"), lua_name("x0"), lua_name("y0")
    line(string.format("  local function %s(t)   -- the weights of taps floor(c) - 1 .. floor(c) + 2, t = c - floor(c)", cw))
    line("    local a, s = -0.75, 1 - t")
    line("    return {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,")
    line("            ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a}")
    line("  end")
    line(string.format("  local %s, %s = kiln.floor(%s), kiln.floor(%s)", x0, y0, nm.ix, nm.iy))
    local wxs, wys, acc = lua_name("wxs"), lua_name("wys"), lua_name("acc")
    line(string.format("  local %s, %s = %s(%s - %s), %s(%s - %s)", wxs, wys, cw, nm.ix, x0, cw, nm.iy, y0))
    line(string.format("  local %s", acc))
    line("  for i = 1, 4 do")
    line("    for j = 1, 4 do")
    line(string.format("      local term = %s(%s + (i - 2), %s + (j - 2), %s[i] * %s[j])", nm.tap, y0, x0, wys, wxs))
    line(string.format("      %s = %s and %s + term or term", acc, acc, acc))
    line("    end")
    line("  end")
    line(string.format("  %s = %s", bind(id), acc))
  else
    local x0, y0, wx, wy = lua_name("x0"), lua_name("y0"), lua_name("wx"), lua_name("wy")
    line(string.format("  local %s, %s = kiln.floor(%s), kiln.floor(%s)", x0, y0, nm.ix, nm.iy))
    line(string.format("  local %s, %s = %s - %s, %s - %s", wx, wy, nm.ix, x0, nm.iy, y0))
    line(string.format("  %s = %s(%s, %s, (1 - %s) * (1 - %s)) + %s(%s, %s + 1, (1 - %s) * %s) + %s(%s + 1, %s, %s * (1 - %s)) + " ..
      "%s(%s + 1, %s + 1, %s * %s)", bind(id), nm.tap, y0, x0, wy, wx, nm.tap, y0, x0, wy, wx, nm.tap, y0, x0, wy, wx,
      nm.tap, y0, x0, wy, wx))
  end
  line("end")
  vals[N.node.outputs[1]] = {shape = {n, c, ho, wo}, dt = "f32", ref = bind(id), name = N.node.outputs[1]}
end)

-- Atan, Asin, Acos: Kiln has no arctangent, so the script computes one: |x| > 1 through
-- pi/2 - atan(1/|x|), a half-angle step down to [0, tan(pi/8)], and the Taylor series there
-- (ten terms: the first left out is below 5e-10). asin(x) = atan(x / sqrt((1 - x)(1 + x)))
-- and acos(x) = 2 atan(sqrt((1 - x) / (1 + x))), whose factors keep 1 - x exact near 1.
op("Atan Asin Acos", "", function()
  local x = need_input(1, "input")
  need_dt(x, "f32", "input")
  local s = ref(x)
  local id = lua_name(N.node.outputs[1])
  local nm = {}
  for _, k in ipairs({"q", "a", "t", "u", "z", "r"}) do nm[k] = lua_name(k) end
  if not use_table then line("local " .. id) end
  line(string.format("do  -- %s%s: an arctangent from a Taylor series after argument reduction", N.node.op,
    N.node.name ~= "" and (" " .. N.node.name:gsub("%c", "?")) or ""))
  local o = N.node.op
  local q = s
  if o == "Asin" then q = string.format("%s / kiln.sqrt((1 - %s) * (1 + %s))", s, s, s)
  elseif o == "Acos" then q = string.format("kiln.sqrt((1 - %s) / (1 + %s))", s, s) end
  line(string.format("  local %s = %s", nm.q, q))
  line(string.format("  local %s = kiln.abs(%s)", nm.a, nm.q))
  line(string.format("  local %s = kiln.where(%s:gt(1), 1 / %s, %s)", nm.t, nm.a, nm.a, nm.a))
  line(string.format("  local %s = %s / (1 + kiln.sqrt(%s * %s + 1))   -- atan(t) = 2 atan(u)", nm.u, nm.t, nm.t, nm.t))
  line(string.format("  local %s = %s * %s", nm.z, nm.u, nm.u))
  -- atan(u) = u (1 + z p(z)), z = u^2, p's coefficients (-1)^j / (2j + 1) for j = 1..9 (Horner)
  local function coef(j) return num(((j % 2 == 1) and -1 or 1) / (2 * j + 1), "f32") end
  local poly = coef(9)
  for j = 8, 1, -1 do poly = string.format("%s + %s * (%s)", coef(j), nm.z, poly) end
  line(string.format("  local %s = 2 * %s * (1 + %s * (%s))", nm.r, nm.u, nm.z, poly))
  local e = string.format("kiln.where(%s:gt(1), %s - %s, %s)", nm.a, num(math.pi / 2, "f32"), nm.r, nm.r)
  if o == "Acos" then e = "2 * " .. e else e = string.format("kiln.sign(%s) * %s", nm.q, e) end
  line(string.format("  %s = %s", bind(id), e))
  line("end")
  vals[N.node.outputs[1]] = {shape = copy(x.shape), dt = "f32", ref = bind(id), name = N.node.outputs[1]}
end)

for _, name in ipairs({"If", "Loop", "Scan"}) do
  H[name] = {attrs = "then_branch else_branch body num_scan_inputs scan_input_axes scan_input_directions " ..
    "scan_output_axes scan_output_directions", f = function()
    fail("%s: control flow (%s with a subgraph) is not supported: Kiln compiles static graphs", who(), name)
  end}
end

