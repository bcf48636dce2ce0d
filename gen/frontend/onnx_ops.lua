-- onnx_ops.lua — the ONNX op handlers of `kiln import` (onnx.lua runs the graph and owns
-- the values; this file says what each ONNX op becomes in Kiln's Lua API).
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
fold.Where = function(ins)
  local c, a, b = ins[1], ins[2], ins[3]
  local shape = bcast(bcast(c.shape, a.shape, who()), b.shape, who())
  local ca = map2(c, a, shape, function(x, y) return x ~= 0 and y or false end)
  local cv = {shape = shape, k = map2(c, b, shape, function(x) return x end)}
  local av = {shape = shape, k = map2(a, c, shape, function(x) return x end)}
  local bv = {shape = shape, k = map2(b, c, shape, function(x) return x end)}
  local k = {}
  for i = 1, #cv.k do k[i] = cv.k[i] ~= 0 and av.k[i] or bv.k[i] end
  local _ = ca
  return k, shape, a.dt
end
fold.ReduceProd = function(ins)
  if N.node.attrs.axes then return nil end
  local p = 1
  for _, v in ipairs(ins[1].k) do p = p * v end
  return {p}, attr("keepdims", "i", 1) == 1 and (function() local s = {} for i = 1, #ins[1].shape do s[i] = 1 end return s end)() or {}, ins[1].dt
end

-- Elementwise binary ops: an operator form where Lua has one.
local binop = {Add = "+", Sub = "-", Mul = "*", Div = "/", Pow = "^"}
op("Add Sub Mul Div Pow", "", function()
  local a, b = need_input(1, "A"), need_input(2, "B")
  local o = N.node.op
  if o == "Pow" and a.dt == "i32" then   -- integer powers through f32, rounded back: exact below 2^24
    need_dt(b, "f32 i32", "input B")
    local shape = bcast(a.shape, b.shape, who())
    out(1, string.format("kiln.cast(kiln.round(kiln.cast(%s, \"f32\") ^ kiln.cast(%s, \"f32\")), \"i32\")", ref(a), ref(b)),
      shape, "i32")
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
  if #ins == 1 then e = "kiln.copy ~= nil and " .. e .. " or " .. e end
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
  local shape = bcast(x.shape, slope.shape, who())
  out(1, string.format("kiln.where(%s:lt(0), %s * %s, %s)", ref(x), ref(x), ref(slope), ref(x)), shape, "f32")
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
    if k[1] ~= 0 then fail("%s: training_mode is true: Kiln compiles inference only", who()) end
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

op("Gemm", "alpha beta transA transB", function()
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

op("Conv", "auto_pad dilations group kernel_shape pads strides", function()
  local x, w, b = need_input(1, "X"), need_input(2, "W"), input(3)
  need_dt(x, "f32", "input X")
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
  local xs, ws = ref(x), ref(w)
  if r == 1 then xs, ws = xs .. ":unsqueeze(2)", ws .. ":unsqueeze(2)" end
  local e = string.format("kiln.conv2d(%s, %s%s%s)", xs, ws, b and (", " .. ref(b)) or "",
    #o > 0 and (", {" .. table.concat(o, ", ") .. "}") or "")
  if r == 1 then e = e .. ":squeeze(2)" end
  out(1, e, shape, "f32")
end)

op("MaxPool AveragePool", "auto_pad ceil_mode count_include_pad dilations kernel_shape pads storage_order strides", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  only_outputs(1)
  local r = #x.shape - 2
  if r ~= 1 and r ~= 2 then fail("%s: %d-D pooling is not supported (1-D and 2-D are)", who(), r) end
  local k = attr("kernel_shape", "ints", nil)
  if not k or #k ~= r then fail("%s: needs kernel_shape with %d values", who(), r) end
  local s, d = list_or("strides", r, 1), list_or("dilations", r, 1)
  for i = 1, r do if d[i] ~= 1 then fail("%s: dilations other than 1 are not supported", who()) end end
  if attr("storage_order", "i", 0) ~= 0 then fail("%s: storage_order 1 is not supported", who()) end
  local ceil = attr("ceil_mode", "i", 0) ~= 0
  local pb, pe = spatial_pads(x.shape, k, s, d)
  local avg = N.node.op == "AveragePool"
  local count_pad = attr("count_include_pad", "i", 0) ~= 0
  local shape = {x.shape[1], x.shape[2]}
  for i = 1, r do
    local span = x.shape[2 + i] + pb[i] + pe[i] - k[i]
    local o = span // s[i] + 1
    if ceil then
      o = -((-span) // s[i]) + 1
      if (o - 1) * s[i] >= x.shape[2 + i] + pb[i] then o = o - 1 end
      local extra = (o - 1) * s[i] + k[i] - (x.shape[2 + i] + pb[i] + pe[i])
      if extra > 0 then
        if avg then fail("%s: ceil_mode with a partial last window is not supported for AveragePool", who()) end
        pe[i] = pe[i] + extra                -- max pooling: padding never wins
      end
    end
    if o < 1 then fail("%s: the kernel is larger than the padded input", who()) end
    shape[2 + i] = o
  end
  local k2, s2 = two(k, r, 1), two(s, r, 1)
  local p4 = r == 1 and {0, pb[1], 0, pe[1]} or {pb[1], pb[2], pe[1], pe[2]}
  local xs = ref(x)
  if r == 1 then xs = xs .. ":unsqueeze(2)" end
  -- Kiln's pools pad at most half the kernel; wider padding is an explicit pad first
  -- (with -inf for max, where padding never wins; with 0 when the average counts it).
  local wide = false
  for i = 1, 4 do wide = wide or p4[i] > k2[(i - 1) % 2 + 1] // 2 end
  if wide then
    if avg and not count_pad then fail("%s: pads wider than half the kernel without count_include_pad are not supported", who()) end
    xs = string.format("kiln.pad(%s, {%d, %d, %d, %d}, \"constant\"%s)", xs, p4[2], p4[4], p4[1], p4[3],
      avg and "" or ", -math.huge")
    p4 = {0, 0, 0, 0}
  end
  local o = {"kernel = " .. ints_lua(k2)}
  if s2[1] ~= k2[1] or s2[2] ~= k2[2] then o[#o + 1] = "stride = " .. ints_lua(s2) end
  if p4[1] ~= 0 or p4[2] ~= 0 or p4[3] ~= 0 or p4[4] ~= 0 then o[#o + 1] = "padding = " .. ints_lua(p4) end
  if avg then o[#o + 1] = "count_include_pad = " .. tostring(count_pad) end
  local e = string.format("kiln.%s(%s, {%s})", avg and "avgpool2d" or "maxpool2d", xs, table.concat(o, ", "))
  if r == 1 then e = e .. ":squeeze(2)" end
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

op("BatchNormalization", "epsilon momentum spatial training_mode", function()
  local x = need_input(1, "X")
  local sc, b, mean, var = need_input(2, "scale"), need_input(3, "B"), need_input(4, "mean"), need_input(5, "var")
  need_dt(x, "f32", "input X")
  attr("momentum", "f", 0.9)
  if attr("spatial", "i", 1) ~= 1 then fail("%s: spatial = 0 is not supported", who()) end
  if attr("training_mode", "i", 0) ~= 0 then fail("%s: training_mode = 1: Kiln compiles inference only", who()) end
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

-- ---- shape ops ----

local function reshape_expr(x, shape)
  return string.format("%s:reshape(%s)", ref(x), shape_lua(shape))
end
local function reshape_fold(ins, shape) return ins[1].k, shape, ins[1].dt end

-- The target shape of Reshape: 0 copies the input dim (unless allowzero), -1 is inferred.
local function reshape_target(x, spec, allowzero)
  local shape, infer, known = {}, nil, 1
  for i, d in ipairs(spec) do
    if d == 0 and allowzero == 0 then d = x.shape[i]
      if not d then fail("%s: shape entry %d is 0 but the input has rank %d", who(), i, #x.shape) end
    end
    if d == -1 then
      if infer then fail("%s: two -1 entries in the shape", who()) end
      infer = i
    elseif d < 1 then fail("%s: shape entry %d is %d", who(), i, d)
    else known = known * d end
    shape[i] = d
  end
  if infer then
    if numel(x.shape) % known ~= 0 then fail("%s: cannot reshape %s to %s", who(), shape_lua(x.shape), ints_lua(spec)) end
    shape[infer] = numel(x.shape) // known
  end
  if numel(shape) ~= numel(x.shape) then fail("%s: cannot reshape %s to %s", who(), shape_lua(x.shape), ints_lua(spec)) end
  return shape
end

local function reshape_shape()
  local x = need_input(1, "data")
  local spec
  if opset < 5 then spec = attr("shape", "ints", nil) else spec = const_input(2, "shape") end
  if not spec then fail("%s: needs a shape", who()) end
  return x, reshape_target(x, spec, attr("allowzero", "i", 0))
end
op("Reshape", "allowzero shape", function()
  local x, shape = reshape_shape()
  out(1, reshape_expr(x, shape), shape, x.dt)
end)
fold.Reshape = function(ins) local _, shape = reshape_shape() return reshape_fold(ins, shape) end

local function flatten_shape()
  local x = need_input(1, "input")
  local r = #x.shape
  local ax = attr("axis", "i", 1)
  if ax < 0 then ax = ax + r end
  if ax < 0 or ax > r then fail("%s: axis out of range", who()) end
  local a, b = 1, 1
  for i = 1, r do if i <= ax then a = a * x.shape[i] else b = b * x.shape[i] end end
  return x, {a, b}
end
op("Flatten", "axis", function() local x, shape = flatten_shape() out(1, reshape_expr(x, shape), shape, x.dt) end)
fold.Flatten = function(ins) local _, shape = flatten_shape() return reshape_fold(ins, shape) end

-- Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input since.
local function axes_arg(i)
  if opset >= 13 then return input(i) and const_input(i, "axes") or nil end
  return attr("axes", "ints", nil)
end

local function squeeze_shape()
  local x = need_input(1, "data")
  local axes = axes_arg(2)
  local drop, shape = {}, {}
  if axes then
    for _, a in ipairs(axes) do
      local d = axis_of(a, #x.shape, who())
      if x.shape[d + 1] ~= 1 then fail("%s: cannot squeeze axis %d of size %d", who(), d, x.shape[d + 1]) end
      drop[d + 1] = true
    end
  end
  for i, d in ipairs(x.shape) do
    if not ((axes and drop[i]) or (not axes and d == 1)) then shape[#shape + 1] = d end
  end
  return x, shape
end
op("Squeeze", "axes", function() local x, shape = squeeze_shape() out(1, reshape_expr(x, shape), shape, x.dt) end)
fold.Squeeze = function(ins) local _, shape = squeeze_shape() return reshape_fold(ins, shape) end

local function unsqueeze_shape()
  local x = need_input(1, "data")
  local axes = axes_arg(2)
  if not axes then fail("%s: needs axes", who()) end
  local r = #x.shape + #axes
  local ins = {}
  for _, a in ipairs(axes) do
    local d = axis_of(a, r, who())
    if ins[d + 1] then fail("%s: axis %d repeated", who(), d) end
    ins[d + 1] = true
  end
  local shape, j = {}, 1
  for i = 1, r do
    if ins[i] then shape[i] = 1 else shape[i] = x.shape[j]; j = j + 1 end
  end
  return x, shape
end
op("Unsqueeze", "axes", function() local x, shape = unsqueeze_shape() out(1, reshape_expr(x, shape), shape, x.dt) end)
fold.Unsqueeze = function(ins) local _, shape = unsqueeze_shape() return reshape_fold(ins, shape) end

op("Transpose", "perm", function()
  local x = need_input(1, "data")
  local r = #x.shape
  local perm = attr("perm", "ints", nil)
  if not perm then perm = {} for i = 1, r do perm[i] = r - i end end
  if #perm ~= r then fail("%s: perm has %d entries for rank %d", who(), #perm, r) end
  local shape = {}
  for i, p in ipairs(perm) do shape[i] = x.shape[axis_of(p, r, who()) + 1] end
  out(1, string.format("%s:permute(%s)", ref(x), ints_lua(perm)), shape, x.dt)
end)

op("Concat", "axis", function()
  local ins = {}
  for i = 1, #N.node.inputs do ins[#ins + 1] = input(i) end
  local r = #ins[1].shape
  local ax = axis_of(attr("axis", "i", nil), r, who())
  local shape = copy(ins[1].shape)
  shape[ax + 1] = 0
  local refs = {}
  for i, v in ipairs(ins) do
    if #v.shape ~= r or v.dt ~= ins[1].dt then fail("%s: inputs differ in rank or dtype", who()) end
    shape[ax + 1] = shape[ax + 1] + v.shape[ax + 1]
    refs[i] = ref(v)
  end
  if #ins == 1 then out(1, refs[1], shape, ins[1].dt) return end
  out(1, string.format("kiln.concat({%s}, %d)", table.concat(refs, ", "), ax), shape, ins[1].dt)
end)
fold.Concat = function(ins)
  local r = #ins[1].shape
  local ax = axis_of(attr("axis", "i", nil), r, who())
  local shape = copy(ins[1].shape)
  shape[ax + 1] = 0
  for _, v in ipairs(ins) do shape[ax + 1] = shape[ax + 1] + v.shape[ax + 1] end
  fold_limit(numel(shape))
  local outer = 1
  for i = 1, ax do outer = outer * shape[i] end
  local k = {}
  for o = 0, outer - 1 do
    for _, v in ipairs(ins) do
      local chunk = numel(v.shape) // outer
      for j = 1, chunk do k[#k + 1] = v.k[o * chunk + j] end
    end
  end
  return k, shape, ins[1].dt
end

op("Split", "axis split num_outputs", function()
  local x = need_input(1, "input")
  local ax = axis_of(attr("axis", "i", 0), #x.shape, who())
  local sizes
  if opset >= 13 then sizes = input(2) and const_input(2, "split") or nil else sizes = attr("split", "ints", nil) end
  local n = #N.node.outputs
  if not sizes then
    if x.shape[ax + 1] % n ~= 0 then fail("%s: dim %d of size %d does not split into %d", who(), ax, x.shape[ax + 1], n) end
    sizes = {}
    for i = 1, n do sizes[i] = x.shape[ax + 1] // n end
  end
  if #sizes ~= n then fail("%s: %d sizes for %d outputs", who(), #sizes, n) end
  local names, total = {}, 0
  for i = 1, n do
    if sizes[i] < 1 then fail("%s: an empty piece (Kiln has no empty tensors)", who()) end
    total = total + sizes[i]
    names[i] = lua_name(N.node.outputs[i] ~= "" and N.node.outputs[i] or "unused")
  end
  if total ~= x.shape[ax + 1] then fail("%s: sizes sum to %d, the dim has %d", who(), total, x.shape[ax + 1]) end
  local lhs = {}
  for i = 1, n do lhs[i] = bind(names[i]) end
  local prefix = use_table and (table.concat(lhs, ", ") .. " = ") or ("local " .. table.concat(names, ", ") .. " = ")
  line(string.format("%skiln.split(%s, %s, %d)  -- Split", prefix, ref(x), ints_lua(sizes), ax))
  for i = 1, n do
    local shape = copy(x.shape)
    shape[ax + 1] = sizes[i]
    if N.node.outputs[i] ~= "" then vals[N.node.outputs[i]] = {shape = shape, dt = x.dt, ref = lhs[i]} end
  end
end)

-- Slice bounds per axis, normalised as ONNX defines them: {axis, start, stop, step}.
local function slice_spec()
  local x = need_input(1, "data")
  local starts, ends, axes, steps
  if opset < 10 then
    starts, ends, axes = attr("starts", "ints", nil), attr("ends", "ints", nil), attr("axes", "ints", nil)
  else
    starts, ends = const_input(2, "starts"), const_input(3, "ends")
    axes = input(4) and const_input(4, "axes") or nil
    steps = input(5) and const_input(5, "steps") or nil
  end
  if not starts or not ends or #starts ~= #ends then fail("%s: needs starts and ends of equal length", who()) end
  local spec, shape = {}, copy(x.shape)
  for i = 1, #starts do
    local d = axis_of(axes and axes[i] or (i - 1), #x.shape, who())
    local n, step = x.shape[d + 1], steps and steps[i] or 1
    if step == 0 then fail("%s: step 0", who()) end
    local s, e = starts[i], ends[i]
    if s < 0 then s = s + n end
    if e < 0 then e = e + n end
    if step > 0 then
      s, e = math.max(0, math.min(s, n)), math.max(0, math.min(e, n))
      shape[d + 1] = math.max(0, (e - s + step - 1) // step)
    else
      s, e = math.max(0, math.min(s, n - 1)), math.max(-1, math.min(e, n - 1))
      shape[d + 1] = math.max(0, (s - e + (-step) - 1) // (-step))
    end
    if shape[d + 1] == 0 then fail("%s: an empty slice (Kiln has no empty tensors)", who()) end
    spec[#spec + 1] = {d, s, e, step, n}
  end
  return x, spec, shape
end
op("Slice", "starts ends axes", function()
  local x, spec, shape = slice_spec()
  local e = ref(x)
  for _, p in ipairs(spec) do
    local d, s, stop, step, n = p[1], p[2], p[3], p[4], p[5]
    if step > 0 then
      if not (s == 0 and stop == n and step == 1) then
        e = string.format("%s:slice(%d, %d, %d%s)", e, d, s, stop, step ~= 1 and (", " .. step) or "")
      end
    else
      e = string.format("kiln.flip(%s, %d):slice(%d, %d, %d%s)", e, d, d, n - 1 - s, n - 1 - stop,
        step ~= -1 and (", " .. (-step)) or "")
    end
  end
  out(1, e, shape, x.dt)
end)
fold.Slice = function(ins)
  local x, spec, shape = slice_spec()
  local idx = {}
  for d = 1, #x.shape do
    local list = {}
    for j = 0, x.shape[d] - 1 do list[#list + 1] = j end
    idx[d] = list
  end
  for _, p in ipairs(spec) do
    local list, j = {}, p[2]
    while (p[4] > 0 and j < p[3]) or (p[4] < 0 and j > p[3]) do list[#list + 1] = j; j = j + p[4] end
    idx[p[1] + 1] = list
  end
  local st, k = strides(x.shape), {}
  local function walk(d, off)
    if d > #x.shape then k[#k + 1] = x.k[off + 1] return end
    for _, j in ipairs(idx[d]) do walk(d + 1, off + j * st[d]) end
  end
  walk(1, 0)
  return k, shape, x.dt
end

local function gather_shape(x, idx, ax)
  local shape = {}
  for i = 1, ax do shape[#shape + 1] = x.shape[i] end
  for _, d in ipairs(idx.shape) do shape[#shape + 1] = d end
  for i = ax + 2, #x.shape do shape[#shape + 1] = x.shape[i] end
  return shape
end
op("Gather", "axis", function()
  local x, idx = need_input(1, "data"), need_input(2, "indices")
  need_dt(idx, "i32", "indices")
  local ax = axis_of(attr("axis", "i", 0), #x.shape, who())
  local n = x.shape[ax + 1]
  local iref
  if idx.k then
    local k = {}
    for i, v in ipairs(idx.k) do
      if v < -n or v >= n then fail("%s: index %d out of range for a dim of %d", who(), v, n) end
      k[i] = v < 0 and v + n or v
    end
    iref = ref({shape = idx.shape, dt = "i32", k = k, name = N.node.inputs[2]})
  else
    iref = string.format("kiln.where(%s:lt(0), %s + %d, %s)", ref(idx), ref(idx), n, ref(idx))
  end
  out(1, string.format("kiln.gather(%s, %s, %d)", ref(x), iref, ax), gather_shape(x, idx, ax), x.dt)
end)
fold.Gather = function(ins)
  local x, idx = ins[1], ins[2]
  local ax = axis_of(attr("axis", "i", 0), #x.shape, who())
  local n = x.shape[ax + 1]
  local outer, inner = 1, 1
  for i = 1, ax do outer = outer * x.shape[i] end
  for i = ax + 2, #x.shape do inner = inner * x.shape[i] end
  fold_limit(outer * #idx.k * inner)
  local k = {}
  for o = 0, outer - 1 do
    for _, j in ipairs(idx.k) do
      if j < -n or j >= n then fail("%s: index %d out of range for a dim of %d", who(), j, n) end
      if j < 0 then j = j + n end
      for i = 1, inner do k[#k + 1] = x.k[(o * n + j) * inner + i] end
    end
  end
  return k, gather_shape(x, idx, ax), x.dt
end

op("GatherElements", "axis", function()
  local x, idx = need_input(1, "data"), need_input(2, "indices")
  need_dt(idx, "i32", "indices")
  local ax = axis_of(attr("axis", "i", 0), #x.shape, who())
  local n = x.shape[ax + 1]
  local iref = string.format("kiln.where(%s:lt(0), %s + %d, %s)", ref(idx), ref(idx), n, ref(idx))
  out(1, string.format("kiln.take_along_dim(%s, %s, %d)", ref(x), iref, ax), copy(idx.shape), x.dt)
end)

op("Expand", "", function()
  local x = need_input(1, "input")
  local spec = const_input(2, "shape")
  local shape = bcast(x.shape, spec, who())
  out(1, string.format("kiln.expand(%s, %s)", ref(x), shape_lua(shape)), shape, x.dt)
end)

op("Tile", "", function()
  local x = need_input(1, "input")
  local reps = const_input(2, "repeats")
  if #reps ~= #x.shape then fail("%s: %d repeats for rank %d", who(), #reps, #x.shape) end
  local shape = {}
  for i, r in ipairs(reps) do
    if r < 1 then fail("%s: repeats must be >= 1", who()) end
    shape[i] = x.shape[i] * r
  end
  out(1, string.format("kiln.tile(%s, %s)", ref(x), ints_lua(reps)), shape, x.dt)
end)

op("Shape", "start end", function()
  local x = need_input(1, "data")
  local r = #x.shape
  local s, e = attr("start", "i", 0), attr("end", "i", r)
  if s < 0 then s = s + r end
  if e < 0 then e = e + r end
  s, e = math.max(0, math.min(s, r)), math.max(0, math.min(e, r))
  local k = {}
  for i = s + 1, e do k[#k + 1] = x.shape[i] end
  if #k == 0 then fail("%s: an empty shape (a scalar input)", who()) end
  out_const(1, k, {#k}, "i32")
end)

op("Size", "", function()
  out_const(1, {numel(need_input(1, "data").shape)}, {}, "i32")
end)

op("Constant", "value value_float value_floats value_int value_ints", function()
  local a = N.node.attrs
  for name in pairs(a) do N.seen[name] = true end
  if a.value then
    local v = tensor_value(a.value.v, who())
    vals[N.node.outputs[1]] = v
    v.name = N.node.outputs[1]
  elseif a.value_float then out_const(1, {a.value_float.v}, {}, "f32")
  elseif a.value_floats then out_const(1, copy(a.value_floats.v), {#a.value_floats.v}, "f32")
  elseif a.value_int then out_const(1, convert_values({a.value_int.v}, 7, "i32", who()), {}, "i32")
  elseif a.value_ints then out_const(1, convert_values(a.value_ints.v, 7, "i32", who()), {#a.value_ints.v}, "i32")
  else fail("%s: needs a value attribute Kiln reads (value, value_float(s), value_int(s))", who()) end
end)

op("ConstantOfShape", "value", function()
  local spec = const_input(1, "input")
  local t = attr("value", "t", nil)
  local v, dt = 0.0, "f32"
  if t then
    local tv = tensor_value(t, who() .. ": value")
    if not tv.k or #tv.k ~= 1 then fail("%s: value must hold one element", who()) end
    v, dt = tv.k[1], tv.dt
  end
  for _, d in ipairs(spec) do if d < 1 then fail("%s: a dim of %d (Kiln has no empty tensors)", who(), d) end end
  if numel(spec) > 4096 then   -- a big fill is a line of the script, not a folded table
    out(1, string.format("kiln.full(%s, %s, %q)", shape_lua(spec), num(v, dt), dt), copy(spec), dt)
    return
  end
  local k = {}
  for i = 1, numel(spec) do k[i] = v end
  out_const(1, k, copy(spec), dt)
end)

op("Range", "", function()
  local s, l, d = {scalar_input(1, "start")}, {scalar_input(2, "limit")}, {scalar_input(3, "delta")}
  local dt = input(1).dt
  if d[1] == 0 then fail("%s: delta 0", who()) end
  local n = math.max(math.ceil((l[1] - s[1]) / d[1]), 0)
  if n == 0 then fail("%s: an empty range (Kiln has no empty tensors)", who()) end
  fold_limit(n)
  local k = {}
  for i = 1, n do k[i] = s[1] + (i - 1) * d[1] end
  out_const(1, k, {math.tointeger(n)}, dt)
end)

op("Trilu", "upper", function()
  local x = need_input(1, "input")
  local k = input(2) and scalar_input(2, "k") or 0
  local f = attr("upper", "i", 1) ~= 0 and "triu" or "tril"
  out(1, string.format("kiln.%s(%s, %d)", f, ref(x), k), x.shape, x.dt)
end)

op("DepthToSpace SpaceToDepth", "blocksize mode", function()
  local x = need_input(1, "input")
  if #x.shape ~= 4 then fail("%s: needs a 4-D input", who()) end
  local b, c, h, w = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local bs = attr("blocksize", "i", nil)
  local e, shape
  if N.node.op == "DepthToSpace" then
    local mode = attr("mode", "s", "DCR")
    if c % (bs * bs) ~= 0 then fail("%s: channels not a multiple of blocksize^2", who()) end
    local c2 = c // (bs * bs)
    shape = {b, c2, h * bs, w * bs}
    if mode == "DCR" then
      e = string.format("%s:reshape({%d, %d, %d, %d, %d, %d}):permute({0, 3, 4, 1, 5, 2})", ref(x), b, bs, bs, c2, h, w)
    else
      e = string.format("%s:reshape({%d, %d, %d, %d, %d, %d}):permute({0, 1, 4, 2, 5, 3})", ref(x), b, c2, bs, bs, h, w)
    end
  else
    if h % bs ~= 0 or w % bs ~= 0 then fail("%s: spatial dims not a multiple of blocksize", who()) end
    shape = {b, c * bs * bs, h // bs, w // bs}
    e = string.format("%s:reshape({%d, %d, %d, %d, %d, %d}):permute({0, 3, 5, 1, 2, 4})", ref(x), b, c, h // bs, bs, w // bs, bs)
  end
  out(1, e .. ":reshape(" .. shape_lua(shape) .. ")", shape, x.dt)
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
  if o == "ReduceProd" then      -- no product reduction in Kiln: the slices multiplied in order
    local count = 1
    for _, d in ipairs(dims) do count = count * x.shape[d + 1] end
    if count > 64 then fail("%s: ReduceProd over %d elements is not supported (at most 64)", who(), count) end
    e = s
    for _, d in ipairs(dims) do
      local n = x.shape[d + 1]
      if n > 64 then fail("%s: ReduceProd over %d elements is not supported (at most 64 per axis)", who(), n) end
      local t = {}
      for j = 0, n - 1 do t[#t + 1] = string.format("%s:slice(%d, %d, %d)", e, d, j, j + 1) end
      e = "(" .. table.concat(t, " * ") .. ")"
    end
    if not keep then e = string.format("%s:reshape(%s)", e, shape_lua(shape)) end
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
  local eq = attr("equation", "s", nil):gsub("%s", "")
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

op("Pad", "mode pads value", function()
  local x = need_input(1, "data")
  local mode = attr("mode", "s", "constant")
  local pads, value
  if opset < 11 then pads, value = attr("pads", "ints", nil), attr("value", "f", 0.0)
  else
    pads = const_input(2, "pads")
    value = input(3) and scalar_input(3, "constant_value") or 0
    if input(4) then fail("%s: the axes input is not supported", who()) end
  end
  local r = #x.shape
  if not pads or #pads ~= 2 * r then fail("%s: needs %d pads", who(), 2 * r) end
  local kmode = ({constant = "constant", reflect = "reflect", edge = "replicate"})[mode]
  if not kmode then fail("%s: mode %q is not supported", who(), mode) end
  local t, shape, last = {}, {}, 0
  for d = 1, r do
    if pads[d] < 0 or pads[r + d] < 0 then fail("%s: negative pads (cropping) are not supported", who()) end
    shape[d] = x.shape[d] + pads[d] + pads[r + d]
    if pads[d] ~= 0 or pads[r + d] ~= 0 then last = math.max(last, r - d + 1) end
  end
  if last == 0 then out(1, ref(x), x.shape, x.dt) return end
  for k = 1, last do
    local d = r - k + 1
    t[#t + 1] = pads[d]
    t[#t + 1] = pads[r + d]
  end
  local e = string.format("kiln.pad(%s, %s, %q%s)", ref(x), ints_lua(t), kmode,
    (kmode == "constant" and value ~= 0) and (", " .. num(value, x.dt)) or "")
  out(1, e, shape, x.dt)
end)

op("OneHot", "axis", function()
  local idx, depth, values = need_input(1, "indices"), scalar_input(2, "depth"), need_input(3, "values")
  local dn = math.tointeger(math.floor(depth))
  if not dn or dn < 1 then fail("%s: depth must be >= 1", who()) end
  if #values.shape ~= 1 or values.shape[1] ~= 2 then fail("%s: values must hold [off, on]", who()) end
  local r = #idx.shape + 1
  local ax = axis_of(attr("axis", "i", -1), r, who())
  local shape, ones = {}, {}
  local j = 1
  for d = 0, r - 1 do
    if d == ax then shape[#shape + 1] = dn; ones[#ones + 1] = dn
    else shape[#shape + 1] = idx.shape[j]; j = j + 1; ones[#ones + 1] = 1 end
  end
  local i = ref(idx)
  if idx.dt == "f32" then i = string.format("kiln.cast(%s, \"i32\")", i) end   -- float indices truncate
  local norm = string.format("kiln.where(%s:lt(0), %s + %d, %s)", i, i, dn, i)
  local on, off
  if values.k and values.dt == "f32" then on, off = num(values.k[2], "f32"), num(values.k[1], "f32")
  else on, off = string.format("kiln.select(%s, 0, 1)", ref(values)), string.format("kiln.select(%s, 0, 0)", ref(values)) end
  local e = string.format("kiln.where(kiln.eq(kiln.unsqueeze(%s, %d), kiln.arange(%d):reshape(%s)), %s, %s)", norm, ax,
    dn, shape_lua(ones), on, off)
  out(1, e, shape, values.dt)
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
  if reduction == "sum" then return string.format("kiln.sum(%s)", loss), {} end
  if reduction ~= "mean" then fail("%s: reduction %q is not supported", who_, reduction) end
  if wt then return string.format("kiln.sum(%s) / kiln.sum(%s)", loss, wt), {} end
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
    else fail("%s: coordinate_transformation_mode %q is not supported", who(), ct) end
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
  attr("extrapolation_value", "f", 0.0)
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
    if not (n_out == n_in and scale == 1) then
      local rows = resize_taps(n_in, n_out, scale, o)
      if d < r - 1 then fail("%s: resizing dim %d is not supported (only the last two dims)", who(), d - 1) end
      if o.mode == "nearest" then   -- a gather: exact
        local idx = {}
        for i, row in ipairs(rows) do idx[i] = row[1][1] end
        local iv = ref({shape = {n_out}, dt = "i32", k = idx, name = N.node.outputs[1] .. "_index" .. (d - 1)})
        e = string.format("kiln.gather(%s, %s, %d)", e, iv, d - 1)
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
  local pb, pe, shape = {}, {}, {x.shape[1], w.shape[2] * g}
  for i = 1, r do
    local n = x.shape[2 + i]
    local target = oshape and oshape[#oshape - r + i] or ((auto == "SAME_UPPER" or auto == "SAME_LOWER") and n * s[i])
    if target then
      local total = s[i] * (n - 1) + op_[i] + (k[i] - 1) * d[i] + 1 - target
      if auto == "SAME_UPPER" then pb[i], pe[i] = total // 2, total - total // 2
      else pb[i], pe[i] = total - total // 2, total // 2 end
    else
      pb[i], pe[i] = pads and pads[i] or 0, pads and pads[r + i] or 0
    end
    shape[2 + i] = (n - 1) * s[i] - pb[i] - pe[i] + d[i] * (k[i] - 1) + 1 + op_[i]
    -- as a convolution: the input spread out with s - 1 zeros between elements, padded by
    -- d (k - 1) - pad on each side (+ output_padding at the end)
    pb[i], pe[i] = d[i] * (k[i] - 1) - pb[i], d[i] * (k[i] - 1) - pe[i] + op_[i]
    if pb[i] < 0 or pe[i] < 0 or shape[2 + i] < 1 then fail("%s: pads larger than the kernel's reach are not supported", who()) end
  end
  if x.shape[2] ~= w.shape[1] then fail("%s: X has %d channels, W %d", who(), x.shape[2], w.shape[1]) end
  local xs, ws = ref(x), ref(w)
  if r == 1 then xs, ws = xs .. ":unsqueeze(2)", ws .. ":unsqueeze(2)" end
  local s2, d2 = two(s, r, 1), two(d, r, 1)
  local pb2, pe2 = two(pb, r, 0), two(pe, r, 0)
  local n, c, h, wd = x.shape[1], x.shape[2], r == 1 and 1 or x.shape[3], x.shape[2 + r]
  if s2[1] > 1 or s2[2] > 1 then   -- zeros between the elements: pad a [.., H, 1, W, 1] view, then trim the tail
    xs = string.format("kiln.pad(%s:reshape({%d, %d, %d, 1, %d, 1}), {0, %d, 0, 0, 0, %d}):reshape({%d, %d, %d, %d})" ..
      ":slice(2, 0, %d):slice(3, 0, %d)", xs, n, c, h, wd, s2[2] - 1, s2[1] - 1, n, c, h * s2[1], wd * s2[2],
      (h - 1) * s2[1] + 1, (wd - 1) * s2[2] + 1)
  end
  local kh, kw = r == 1 and 1 or k[1], k[r]
  -- W [Cin, Cout/g, kh, kw] -> [Cout, Cin/g, kh, kw], flipped in space
  local cin_g, cout_g = c // g, w.shape[2]
  ws = string.format("kiln.flip(%s:reshape({%d, %d, %d, %d, %d}):permute({0, 2, 1, 3, 4}):reshape({%d, %d, %d, %d}), {2, 3})",
    ws, g, cin_g, cout_g, kh, kw, g * cout_g, cin_g, kh, kw)
  local opts = {string.format("padding = {%d, %d, %d, %d}", pb2[1], pb2[2], pe2[1], pe2[2])}
  if d2[1] ~= 1 or d2[2] ~= 1 then opts[#opts + 1] = "dilation = " .. ints_lua(d2) end
  if g ~= 1 then opts[#opts + 1] = "groups = " .. g end
  local e = string.format("kiln.conv2d(%s, %s%s, {%s})", xs, ws, b and (", " .. ref(b)) or "", table.concat(opts, ", "))
  if r == 1 then e = e .. ":squeeze(2)" end
  out(1, e, shape, "f32")
end)

op("LRN", "alpha beta bias size", function()
  local x = need_input(1, "X")
  need_dt(x, "f32", "input X")
  if #x.shape ~= 4 then fail("%s: needs a 4-D input", who()) end
  local size = attr("size", "i", nil)
  local alpha, beta, bias = attr("alpha", "f", 0.0001), attr("beta", "f", 0.75), attr("bias", "f", 1.0)
  local lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
  local n, c, h, wd = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local s = ref(x)
  -- the sum of squares over a window of channels: a padded sum along C
  local sq = string.format("kiln.sum(kiln.stack({%s}, 0), 0)", (function()
    local t = {}
    for j = 0, size - 1 do
      t[#t + 1] = string.format("kiln.pad(%s * %s, {0, 0, 0, 0, %d, %d}):slice(1, %d, %d)", s, s, lo, hi, j, j + c)
    end
    return table.concat(t, ", ")
  end)())
  local _ = n + h + wd
  out(1, string.format("%s / (%s + %s * %s) ^ %s", s, num(bias, "f32"), num(alpha / size, "f32"), sq, num(beta, "f32")),
    x.shape, "f32")
end)

op("GatherND", "batch_dims", function()
  local x, idx = need_input(1, "data"), need_input(2, "indices")
  need_dt(idx, "i32", "indices")
  if attr("batch_dims", "i", 0) ~= 0 then fail("%s: batch_dims other than 0 is not supported", who()) end
  local q = idx.shape[#idx.shape]
  if q > #x.shape then fail("%s: index tuples of %d for rank %d", who(), q, #x.shape) end
  -- each index tuple becomes one flat index into the first q dims
  local strides_, acc = {}, 1
  for j = q, 1, -1 do strides_[j] = acc; acc = acc * x.shape[j] end
  local flat = {acc}
  for j = q + 1, #x.shape do flat[#flat + 1] = x.shape[j] end
  local shape = {}
  for j = 1, #idx.shape - 1 do shape[j] = idx.shape[j] end
  for j = q + 1, #x.shape do shape[#shape + 1] = x.shape[j] end
  local i, last = ref(idx), #idx.shape - 1
  local terms = {}
  for j = 1, q do   -- component j, negative counting from the end, times its stride
    local comp = string.format("%s:select(%d, %d)", i, last, j - 1)
    terms[j] = string.format("kiln.where(%s:lt(0), %s + %d, %s) * %d", comp, comp, x.shape[j], comp, strides_[j])
  end
  local lin = table.concat(terms, " + ")
  out(1, string.format("kiln.gather(%s:reshape(%s), %s, 0)", ref(x), shape_lua(flat), lin), shape, x.dt)
end)

-- ---- ops of constant-known structure ----

op("Compress", "axis", function()
  local x = need_input(1, "input")
  local cond = const_input(2, "condition")
  local ax = attr("axis", "i", nil)
  local src, d = x, 0
  local e = ref(x)
  if ax == nil then
    e = string.format("%s:reshape({%d})", e, numel(x.shape))
    src = {shape = {numel(x.shape)}}
  else d = axis_of(ax, #x.shape, who()) end
  local idx = {}
  for i, c in ipairs(cond) do
    if c ~= 0 and i <= src.shape[d + 1] then idx[#idx + 1] = i - 1 end
  end
  if #idx == 0 then fail("%s: an empty result (Kiln has no empty tensors)", who()) end
  local shape = copy(src.shape)
  shape[d + 1] = #idx
  local iv = ref({shape = {#idx}, dt = "i32", k = idx, name = N.node.outputs[1] .. "_index"})
  out(1, string.format("kiln.gather(%s, %s, %d)", e, iv, d), shape, x.dt)
end)

op("ReverseSequence", "batch_axis time_axis", function()
  local x = need_input(1, "input")
  local lens = const_input(2, "sequence_lens")
  local ba, ta = attr("batch_axis", "i", 1), attr("time_axis", "i", 0)
  if #x.shape < 2 then fail("%s: needs rank >= 2", who()) end
  local nb, nt = x.shape[ba + 1], x.shape[ta + 1]
  if #lens ~= nb then fail("%s: %d sequence_lens for a batch of %d", who(), #lens, nb) end
  need_dt(x, "f32", "input")
  -- the time index every element reads: reversed below its sequence's length
  local full, k = copy(x.shape), {}
  fold_limit(numel(full))
  local st = strides(full)
  for i = 0, numel(full) - 1 do
    local b, t = (i // st[ba + 1]) % nb, (i // st[ta + 1]) % nt
    local l = lens[b + 1]
    k[i + 1] = t < l and l - 1 - t or t
  end
  local iv = ref({shape = full, dt = "i32", k = k, name = N.node.outputs[1] .. "_index"})
  out(1, string.format("kiln.take_along_dim(%s, %s, %d)", ref(x), iv, ta), full, x.dt)
end)

-- Scatter with import-time indices: a constant 0/1 matrix [numel(data), numel(updates)]
-- routes every update to its place (sums duplicates for reduction "add"), and a mask keeps
-- data where nothing is written. Contract: places[u] = flat data index update u writes.
local function scatter_out(data, updates, places, reduction)
  local nd, nu = numel(data.shape), numel(updates.shape)
  fold_limit(nd * nu)
  local m, hit = {}, {}
  for i = 1, nd * nu do m[i] = 0.0 end
  for i = 1, nd do hit[i] = 0 end
  for u, p in ipairs(places) do
    if reduction == "none" then   -- the last write wins
      for j = 1, nu do if m[p * nu + j] ~= 0 then m[p * nu + j] = 0.0 end end
    end
    m[p * nu + u] = 1.0
    hit[p + 1] = 1
  end
  local mv = ref({shape = {nd, nu}, dt = "f32", k = m, name = N.node.outputs[1] .. "_route"})
  local hv = ref({shape = data.shape, dt = "bool", k = hit, name = N.node.outputs[1] .. "_written"})
  local routed = string.format("kiln.matmul(%s, %s:reshape({%d})):reshape(%s)", mv, ref(updates), nu, shape_lua(data.shape))
  if reduction == "add" then return string.format("%s + %s", ref(data), routed) end
  if reduction ~= "none" then fail("%s: reduction %q is not supported", who(), reduction) end
  return string.format("kiln.where(%s, %s, %s)", hv, routed, ref(data))
end

op("ScatterElements Scatter", "axis reduction", function()
  local data, updates = need_input(1, "data"), need_input(3, "updates")
  need_dt(data, "f32", "data")
  local idx = const_input(2, "indices")
  local iv = input(2)
  local ax = axis_of(attr("axis", "i", 0), #data.shape, who())
  local n = data.shape[ax + 1]
  local sd, su = strides(data.shape), strides(iv.shape)
  local places = {}
  for u = 0, #idx - 1 do
    local p, rem = 0, u
    for dd = 1, #iv.shape do
      local c = rem // su[dd]
      rem = rem % su[dd]
      if dd == ax + 1 then
        c = idx[u + 1]
        if c < -n or c >= n then fail("%s: index %d out of range for a dim of %d", who(), c, n) end
        if c < 0 then c = c + n end
      end
      p = p + c * sd[dd]
    end
    places[u + 1] = p
  end
  out(1, scatter_out(data, updates, places, attr("reduction", "s", "none")), copy(data.shape), "f32")
end)

op("ScatterND", "reduction", function()
  local data, updates = need_input(1, "data"), need_input(3, "updates")
  need_dt(data, "f32", "data")
  local idx = const_input(2, "indices")
  local iv = input(2)
  local q = iv.shape[#iv.shape]
  local sd = strides(data.shape)
  local slice = 1
  for dd = q + 1, #data.shape do slice = slice * data.shape[dd] end
  local places = {}
  for t = 0, #idx // q - 1 do
    local base = 0
    for j = 1, q do
      local c, n = idx[t * q + j], data.shape[j]
      if c < -n or c >= n then fail("%s: index %d out of range for a dim of %d", who(), c, n) end
      base = base + (c < 0 and c + n or c) * sd[j]
    end
    for e = 0, slice - 1 do places[#places + 1] = base + e end
  end
  out(1, scatter_out(data, updates, places, attr("reduction", "s", "none")), copy(data.shape), "f32")
end)

for _, name in ipairs({"If", "Loop", "Scan"}) do
  H[name] = {attrs = "then_branch else_branch body num_scan_inputs scan_input_axes scan_input_directions " ..
    "scan_output_axes scan_output_directions", f = function()
    fail("%s: control flow (%s with a subgraph) is not supported: Kiln compiles static graphs", who(), name)
  end}
end
