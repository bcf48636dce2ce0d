-- onnx.lua — translates a decoded ONNX graph (onnx_read.c's tables) into a Kiln model
-- script: one line per ONNX node, calling the same Lua API a person would write, with
-- the ONNX op type in a comment.
--
-- It tracks every ONNX value's shape and dtype itself (static shapes; a named dynamic
-- dim needs -D), so it can resolve what ONNX leaves to run time but Kiln fixes at build
-- time: a Reshape's shape, a Slice's bounds, a Squeeze's axes. Values computable at
-- import time — initializers, Constant nodes, and the Shape -> Gather -> Concat chains
-- exporters emit — are folded here and appear in the script only where a traced op uses
-- them (a literal, a kiln.constant, or a kiln.param of the weights file).
--
-- dtypes: ONNX float is f32, int64 and int32 are i32 (an int64 constant that does not
-- fit is an error), bool is bool; the narrow and unsigned integers and float16/bfloat16
-- are carried in i32/f32 with their ONNX type alongside (carried, carried_policy: narrow
-- integer arithmetic wraps at its width, a cast to float16 rounds to it); anything else
-- (double, strings) is refused naming the value.
-- Errors are tables {msg = ...}: onnx_import.c prints them as one line; any other error
-- is a bug in this file.
local model, opts = ...

local opset = model.opset

local function fail(fmt, ...) error({msg = string.format(fmt, ...)}, 0) end

-- ---- names ----

local lua_keywords = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while kiln nn math string table]]):gmatch("%S+") do lua_keywords[w] = true end
local c_reserved = {}
for w in ([[auto break case char const continue default do double else enum extern float for
  goto if inline int long register restrict return short signed sizeof static struct switch
  typedef union unsigned void volatile while weights arena]]):gmatch("%S+") do c_reserved[w] = true end

-- An identifier made of name: other characters become '_', a leading digit gets 'v'.
local function sanitize(name, prefix)
  local s = name:gsub("[^%w_]", "_")
  if s == "" or s:match("^%d") then s = prefix .. s end
  return s
end

local used_lua = {}
-- A fresh Lua variable name for ONNX value name.
local function lua_name(name)
  local base = sanitize(name, "v_")
  if lua_keywords[base] then base = base .. "_" end
  local s, k = base, 1
  while used_lua[s] do k = k + 1; s = base .. "_" .. k end
  used_lua[s] = true
  return s
end

local used_c = {}
-- A fresh C identifier (a graph input's or output's name), unique ignoring case.
local function c_name(name)
  local base = sanitize(name, "t_"):gsub("^_+", "")
  if base == "" or base:match("^%d") then base = "t_" .. base end
  if c_reserved[base:lower()] then base = base .. "_" end
  if #base > 200 then base = base:sub(1, 200) end
  local s, k = base, 1
  while used_c[s:lower()] do k = k + 1; s = base .. "_" .. k end
  used_c[s:lower()] = true
  return s
end

-- ---- the script being written ----

local lines = {}
local function line(s) lines[#lines + 1] = s end
-- Over ~190 locals Lua refuses the chunk: big graphs keep their values in a table `v`.
local use_table = #model.nodes + #model.inputs + #model.inits > 150
local function bind(id) return use_table and ("v." .. id) or id end
local function assign(id) return use_table and ("v." .. id .. " = ") or ("local " .. id .. " = ") end

local weights = {}                    -- {name=, id=, dims=}: the safetensors file, in order
local used_weight = {}                -- weight names taken

-- ---- values ----
-- A value: {shape = {...}, dt = "f32"|"i32"|"bool", ref = Lua expression or nil,
-- k = flat values (Lua numbers; bool as 0/1) when known at import time, init = the
-- initializer table a big float constant comes from}.

local vals = {}

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

local function shape_lua(shape)
  local t = {}
  for i, d in ipairs(shape) do t[i] = tostring(d) end
  return "{" .. table.concat(t, ", ") .. "}"
end

local function copy(t)
  local r = {}
  for i, v in ipairs(t) do r[i] = v end
  return r
end

-- ONNX dtype code -> Kiln dtype, or nil.
local kiln_dtype = {[1] = "f32", [6] = "i32", [7] = "i32", [9] = "bool", [2] = "i32", [3] = "i32", [4] = "i32",
  [5] = "i32", [12] = "i32", [13] = "i32", [10] = "f32", [16] = "f32"}
-- ONNX dtypes Kiln carries in a wider one (a value's odt): the narrow integers as int32 —
-- every uint8/int8/uint16/int16 value fits, uint32/uint64 values must be below 2^31 —
-- and float16/bfloat16 as float32, which holds each of their values exactly. What an op
-- may do with them is decided in translate_node (carried_ops).
local carried = {[2] = {bits = 8}, [3] = {bits = 8, signed = true}, [4] = {bits = 16}, [5] = {bits = 16, signed = true},
  [12] = {bits = 32}, [13] = {bits = 64}, [10] = {half = true}, [16] = {half = true}}
local onnx_dtype_names = {[0] = "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
  "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16"}

-- A number as Lua source that reads back as the same float32/int.
local function num(v, dt)
  if dt ~= "f32" then
    if dt == "bool" then return v ~= 0 and "true" or "false" end
    return string.format("%d", v)
  end
  if v ~= v then return "(0 / 0)" end
  if v == math.huge then return "math.huge" end
  if v == -math.huge then return "-math.huge" end
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", math.tointeger(v)) end
  return string.format("%.9g", v)
end

-- Contract: values of an ONNX tensor table (onnx_read.c) converted for dtype dt; int64
-- values outside int32 are an error naming what.
local function convert_values(values, code, dt, what)
  local out = {}
  for i, v in ipairs(values) do
    if dt == "i32" then
      if v < -2147483648 or v > 2147483647 then
        fail("%s: %s value %d does not fit int32 (Kiln's integers are 32-bit)", what, onnx_dtype_names[code] or "int64", v)
      end
      out[i] = math.tointeger(v)
    elseif dt == "bool" then out[i] = v ~= 0 and 1 or 0
    else out[i] = v + 0.0 end
  end
  return out
end

-- A value from an ONNX tensor table (initializer, Constant, frozen input).
local function tensor_value(t, what)
  local dt = kiln_dtype[t.dtype]
  if not dt then fail("%s: unsupported dtype %s", what, onnx_dtype_names[t.dtype] or tostring(t.dtype)) end
  local v = {shape = copy(t.dims), dt = dt}
  for _, d in ipairs(t.dims) do
    -- An empty tensor may stand for an absent input (Resize's roi and scales); it is an
    -- error only when an op uses it (ref).
    if d == 0 then return {shape = v.shape, dt = dt, k = {}, empty = what} end
  end
  if t.values then v.k = convert_values(t.values, t.dtype, dt, what) end
  if carried[t.dtype] then v.odt = t.dtype   -- widened values, never a weight of the file
  elseif dt == "f32" then v.init = t end
  if not v.k and v.odt then fail("%s: a %s tensor of %d elements is too large to import", what, onnx_dtype_names[t.dtype], numel(v.shape)) end
  if not v.k and dt ~= "f32" then fail("%s: an integer tensor of %d elements is too large to import", what, numel(v.shape)) end
  return v
end

local function uniform(k)
  for i = 2, #k do if k[i] ~= k[1] then return false end end
  return true
end

-- Contract: a Lua expression for value v, writing the line that creates it first when v
-- is an import-time constant not yet in the script.
local function ref(v)
  if v.ref then return v.ref end
  if v.empty then fail("%s: an empty tensor (a dim of 0): Kiln has no empty tensors", v.empty) end
  local id = lua_name(v.name or "const")
  local n = numel(v.shape)
  local expr
  -- Initializers (but scalars) and large Constant values go to the weights file, named
  -- as in the ONNX graph; small constants are written inline.
  if v.init and (not v.k or (v.is_init and #v.shape > 0) or n > 16) then
    local wname = v.is_init and v.init.name ~= "" and v.init.name or id
    if wname:find("[%c]") then wname = id end
    while used_weight[wname] do wname = wname .. "_" end
    used_weight[wname] = true
    weights[#weights + 1] = {name = wname, id = v.init.id, dims = copy(v.shape)}
    expr = string.format("kiln.param(%q, %s)", wname, shape_lua(v.shape))
    if #v.shape == 0 then fail("initializer '%s': a scalar weight too large to inline", wname) end
  elseif n > 16 and uniform(v.k) then
    expr = string.format("kiln.full(%s, %s, %q)", shape_lua(v.shape), num(v.k[1], v.dt), v.dt)
  else
    local t = {}
    for i, x in ipairs(v.k) do t[i] = num(x, v.dt) end
    if #v.shape == 0 then
      expr = string.format("kiln.constant(%s, nil, %q)", t[1], v.dt)
    else
      expr = string.format("kiln.constant({%s}, %s, %q)", table.concat(t, ", "), shape_lua(v.shape), v.dt)
    end
  end
  line(assign(id) .. expr .. (v.is_init and "  -- initializer" or "  -- constant"))
  v.ref = bind(id)
  return v.ref
end

-- An operand of an elementwise expression: a rank-0 f32 constant as a Lua number.
local function arg(v)
  if v.k and #v.shape == 0 and v.dt == "f32" and not v.ref then return num(v.k[1], "f32") end
  return ref(v)
end

-- ---- shapes ----

local function bcast(a, b, what)
  local r = math.max(#a, #b)
  local out = {}
  for i = 1, r do
    local x = a[#a - r + i] or 1
    local y = b[#b - r + i] or 1
    if x ~= y and x ~= 1 and y ~= 1 then
      fail("%s: shapes %s and %s do not broadcast", what, shape_lua(a), shape_lua(b))
    end
    out[i] = x == 1 and y or x
  end
  return out
end

-- Axis in [-rank, rank) as 0-based.
local function axis_of(a, rank, what)
  a = type(a) == "number" and math.tointeger(a) or nil
  if not a or a < -rank or a >= rank then fail("%s: axis %s out of range for rank %d", what, tostring(a), rank) end
  return a < 0 and a + rank or a
end

-- Flat index helpers for folding.
local function strides(shape)
  local s, acc = {}, 1
  for i = #shape, 1, -1 do s[i] = acc; acc = acc * shape[i] end
  return s
end

-- ---- nodes ----

local N = {}                          -- the node being translated (fields set by translate_node)

local function who() return N.who end

-- Input i of the current node (1-based); nil when absent or "".
local function input(i)
  local name = N.node.inputs[i]
  if not name or name == "" then return nil end
  local v = vals[name]
  if not v then fail("%s: input '%s' is not produced by any earlier node, initializer or graph input", who(), name) end
  return v
end

local function need_input(i, what)
  local v = input(i)
  if not v then fail("%s: needs input %d (%s)", who(), i, what) end
  return v
end

-- Attribute name of the current node, checked to be of kind (or nil -> default).
local function attr(name, kind, default)
  local a = N.node.attrs[name]
  if a == nil then return default end
  N.seen[name] = true
  if a.kind ~= kind then
    local names = {f = "a float", i = "an int", s = "a string", t = "a tensor", g = "a graph", floats = "floats",
      ints = "ints", strings = "strings", other = "of an unknown type"}
    fail("%s: attribute '%s' should be %s, is %s", who(), name, names[kind] or kind, names[a.kind] or a.kind)
  end
  return a.v
end

-- The values of constant input i (import-time known), or fail naming why.
local function const_input(i, what)
  local v = input(i)
  if not v then return nil end
  if not v.k then
    local name = N.node.inputs[i]
    local graph_input = false
    for _, gi in ipairs(model.inputs) do graph_input = graph_input or gi.name == name end
    fail("%s: input %d (%s, '%s') must be known at import time: Kiln's shapes are static (%s)", who(), i, what, name,
      graph_input and string.format("a graph input: use --freeze %s=FILE.pb", name) or "it is computed from run-time inputs")
  end
  return v.k, v
end

local function need_dt(v, dts, what)
  if not dts:find(v.dt, 1, true) then
    fail("%s: %s is %s: not supported (Kiln's translation of %s takes %s)", who(), what,
      v.dt == "i32" and "an integer tensor" or v.dt, N.node.op, dts)
  end
end

-- Defines output i as expression expr with shape and dtype: writes the node's line.
local function out(i, expr, shape, dt)
  local name = N.node.outputs[i]
  if not name or name == "" then return end
  local id = lua_name(name)
  local comment = "  -- " .. N.node.op
  if N.node.name ~= "" and N.node.name ~= name then comment = comment .. " " .. N.node.name:gsub("%c", "?") end
  line(assign(id) .. expr .. comment)
  vals[name] = {shape = shape, dt = dt, ref = bind(id), name = name}
end

-- Defines output i as an import-time constant (folded; no line until used).
local function out_const(i, k, shape, dt)
  local name = N.node.outputs[i]
  if not name or name == "" then return end
  local v = {shape = shape, dt = dt, k = k, name = name}
  for _, d in ipairs(shape) do
    -- an empty constant may still fold (a shape prefix of length 0 in a Concat); an op
    -- that traces it fails in ref
    if d == 0 then v.empty = who() end
  end
  vals[name] = v
end

local function only_outputs(n)
  for i = n + 1, #N.node.outputs do
    if N.node.outputs[i] ~= "" then fail("%s: output %d is not supported (only the first %d)", who(), i, n) end
  end
end

local function ints_lua(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = tostring(v) end
  return "{" .. table.concat(s, ", ") .. "}"
end


-- ---- op handlers (onnx_ops.lua, onnx_shape.lua) ----
-- H[op] = {attrs = "names it reads", f = function() ... end}; fold[op](ins) computes an
-- op of constants at import time. onnx_ops.lua fills both from the helpers below.

local H, fold = {}, {}
local register_ops, register_shape_ops, register_quant_ops = select(3, ...)
local ctx = {
  H = H, fold = fold, N = N, vals = vals, opset = opset, fail = fail, who = who, input = input,
  need_input = need_input, attr = attr, const_input = const_input, need_dt = need_dt, out = out,
  out_const = out_const, only_outputs = only_outputs, ref = ref, arg = arg, num = num, numel = numel,
  shape_lua = shape_lua, ints_lua = ints_lua, copy = copy, bcast = bcast, axis_of = axis_of, strides = strides,
  line = line, bind = bind, lua_name = lua_name, use_table = use_table, kiln_dtype = kiln_dtype,
  onnx_dtype_names = onnx_dtype_names, tensor_value = tensor_value, convert_values = convert_values,
  carried = carried, assign = assign,
}
register_ops(ctx)
register_shape_ops(ctx)
register_quant_ops(ctx)

-- ---- the graph ----

-- ---- values carried wider than ONNX types them (carried, above) ----
-- keep: every result value is an input value (or a bool or an index; Mod: an exact
--   remainder, no wider than its operands), so the result keeps the data input's ONNX
--   dtype at any width;
-- wrap: integer arithmetic: int32 arithmetic wraps modulo 2^32, and reducing the result
--   modulo 2^bits gives what ONNX's narrow type computes (bits divides 32); float16 and
--   uint32/uint64 values are refused here;
-- arg: a carried value may be a non-data input (Pow's exponent, Shape's...) of an op
--   whose result has its own dtype.
-- Any other op refuses carried inputs: its handler was written for float32/int32/bool.
local carried_ops = {}
for names, class in pairs({
  ["Identity Reshape Flatten Squeeze Unsqueeze Transpose Concat Split Slice Gather GatherElements GatherND Expand Tile " ..
   "Max Min Clip Where Pad ReduceMax ReduceMin Trilu Dropout Compress DepthToSpace SpaceToDepth MaxPool TopK Mod"] = "keep",
  ["Add Sub Mul Neg Abs Sum Div BitShift"] = "wrap",
  ["Equal Less LessOrEqual Greater GreaterOrEqual ArgMax ArgMin Shape Size Pow DequantizeLinear QuantizeLinear " ..
   "MatMulInteger ConvInteger QLinearMatMul QLinearConv"] = "arg",
}) do
  for name in names:gmatch("%S+") do carried_ops[name] = class end
end
local wrap_used = false                     -- the script defines onnx_wrap when true

-- x reduced modulo 2^c.bits into c's range (signed: two's complement), for constants.
local function wrap_k(x, c)
  local m = 1 << c.bits
  local r = math.tointeger(x) % m
  if c.signed and r >= m // 2 then r = r - m end
  return r
end

-- x (a float32 value) rounded to the nearest float16 value, ties to even, as op
-- round_f16 does (gen/util.c, kiln_round_f16): for constants.
local function round_f16_k(x)
  local u = string.unpack("<I4", string.pack("<f", x))
  local sign, a = u & 0x80000000, u & 0x7fffffff
  if a >= 0x7f800000 then return x end
  if a >= 0x477ff000 then return sign ~= 0 and -math.huge or math.huge end
  if a < 0x38800000 then   -- a half subnormal: the nearest multiple of 2^-24, ties to even
    local q = math.abs(x) * 2 ^ 24
    local f = math.floor(q)
    if q - f > 0.5 or (q - f == 0.5 and f % 2 == 1) then f = f + 1 end
    local r = f * 2 ^ -24
    return sign ~= 0 and -r or r
  end
  a = (a + 0xfff + ((a >> 13) & 1)) & ~0x1fff
  return (string.unpack("<f", string.pack("<I4", sign | a)))
end

-- Contract: the ONNX dtype code the current node's input i has (its odt, or the code of
-- its Kiln dtype: float, int64 for i32 (the two are alike here), bool).
local function code_of(v) return v.odt or ({f32 = 1, i32 = 7, bool = 9})[v.dt] end

-- Contract: checks the current node against carried_ops before it is translated, and
-- returns the function that, run after it, tags its outputs with their ONNX dtype and
-- wraps narrow integer arithmetic (or nil when no input is carried and nothing is due).
local function carried_policy(node)
  local op = node.op
  local data_i = op == "Where" and 2 or 1
  local data = node.inputs[data_i] and node.inputs[data_i] ~= "" and vals[node.inputs[data_i]]
  local any
  for i = 1, #node.inputs do
    local v = node.inputs[i] ~= "" and vals[node.inputs[i]]
    if v and v.odt then any = any or v.odt end
  end
  local target   -- Cast and CastLike: the ONNX dtype converted to
  if op == "Cast" then target = N.node.attrs.to and N.node.attrs.to.v
  elseif op == "CastLike" and node.inputs[2] and vals[node.inputs[2]] then target = code_of(vals[node.inputs[2]]) end
  if not any and not (target and carried[target]) then return nil end
  local dc = data and data.odt and carried[data.odt]
  local class = carried_ops[op]
  -- a right shift never widens its operand: no wrap, and uint32/uint64 allowed
  if op == "BitShift" and N.node.attrs.direction and N.node.attrs.direction.v == "RIGHT" then class = "keep" end
  local tc = target and carried[target]
  if target then
    local src = data and code_of(data)
    local rounds = tc and tc.half and src ~= target and not (src == 2 or src == 3 or src == 9)
    if rounds and target ~= 10 then
      fail("%s: cast to %s: rounding to %s is not supported", who(), onnx_dtype_names[target], onnx_dtype_names[target])
    end
    if tc and tc.bits and tc.bits > 16 and not (src == 2 or src == 4 or src == 9 or src == 12 or src == 13) then
      fail("%s: cast to %s: a value at or above 2^31 is not supported (Kiln's integers are 32-bit)", who(),
        onnx_dtype_names[target])
    end
    class = rounds and "round" or tc and tc.bits and tc.bits <= 16 and src ~= target and "wrap" or "cast"
    dc = tc
  elseif not class then
    fail("%s: %s tensors are not supported by Kiln's translation of %s", who(), onnx_dtype_names[any], op)
  elseif dc and class == "wrap" and (dc.half or dc.bits > 16) then
    fail("%s: %s arithmetic is not supported (%s)", who(), onnx_dtype_names[data.odt],
      dc.half and "Kiln computes in float32 and does not round to it" or "Kiln's integers are 32-bit")
  end
  if dc and class == "arg" and op == "Pow" then   -- only its exponent may be carried: a base would need wrapping
    fail("%s: %s tensors are not supported by Kiln's translation of Pow (as the base)", who(), onnx_dtype_names[data.odt])
  end
  if not dc or class == "arg" then return nil end
  local code = target or data.odt
  local dt = kiln_dtype[code]
  return function()
    for i, name in ipairs(node.outputs) do
      local v = vals[name]
      if v and v.dt == dt and not (op == "TopK" and i == 2) then
        v.odt = code
        if class == "round" then   -- to float16: kiln.round_f16, or the same in Lua for a constant
          if v.k then
            for j, x in ipairs(v.k) do v.k[j] = round_f16_k(x) end
          else
            line(string.format("%s = kiln.round_f16(%s)  -- float16: rounded to it", v.ref, v.ref))
          end
        elseif class == "wrap" then
          if v.k then
            for j, x in ipairs(v.k) do v.k[j] = wrap_k(x, dc) end
          else
            wrap_used = true
            line(string.format("%s = onnx_wrap(%s, %d, %s)  -- %s wraps at %d bits", v.ref, v.ref, dc.bits,
              dc.signed and "true" or "false", onnx_dtype_names[code], dc.bits))
          end
        end
      end
    end
  end
end

-- Contract: translates one node: folds it when its inputs are constants and the op
-- folds, else calls its handler; unknown ops and attributes are errors naming the node.
local function translate_node(node, index)
  N.node, N.seen = node, {}
  local label = node.name ~= "" and node.name or (node.outputs[1] or ("#" .. index))
  N.who = string.format("node '%s' (%s)", label:gsub("%c", "?"), node.op)
  local training = node.domain == "ai.onnx.preview.training" and (node.op == "Adagrad" or node.op == "Adam" or
    node.op == "Momentum")
  if node.domain ~= "" and node.domain ~= "ai.onnx" and not training then
    fail("node '%s': op '%s' of domain '%s' is not supported (only the default ONNX domain is)", label, node.op, node.domain)
  end
  if opset == 0 and not training then
    fail("node '%s': op '%s' of the default domain, which the model does not import", label, node.op)
  end
  local h = H[node.op]
  if not h then fail("node '%s': unsupported op '%s'", label, node.op) end
  local known = {}
  for a in h.attrs:gmatch("%S+") do known[a] = true end
  local unknown = {}
  for a in pairs(node.attrs) do
    if not known[a] then unknown[#unknown + 1] = a end
  end
  table.sort(unknown)   -- the same message every run, whatever the table order
  if unknown[1] then fail("%s: unsupported attribute '%s'", who(), unknown[1]) end
  local finish = carried_policy(node)
  local f = fold[node.op]
  if f and #node.outputs == 1 then
    local ins, all = {}, #node.inputs > 0
    for i = 1, #node.inputs do
      local v = input(i)
      if v then
        ins[#ins + 1] = v
        if not v.k then all = false end
      end
    end
    if all then
      local k, shape, dt = f(ins)
      if k then
        out_const(1, k, shape, dt)
        if finish then finish() end
        return
      end
    end
  end
  h.f()
  if finish then finish() end
end

-- The comment on a graph input's or output's line when Kiln's dtype is not ONNX's.
local function io_note(code, verb)
  local c = carried[code]
  if code == 7 then return "  -- int64 in the ONNX model: " .. (verb == "pass" and "pass int32" or "int32 here")
  elseif c and c.half then return string.format("  -- %s in the ONNX model: float32 %s, holding %s values exactly",
    onnx_dtype_names[code], verb == "pass" and "passed" or "here", onnx_dtype_names[code])
  elseif c then return string.format("  -- %s in the ONNX model: int32 %s%s", onnx_dtype_names[code],
    verb == "pass" and "passed" or "here", c.bits > 16 and " (values below 2^31)" or "") end
  return ""
end

-- Contract: the graph inputs (declared in the script, or constants from --freeze) and
-- the initializers become values; the declarations are script lines.
local function declare_inputs()
  local inits = {}
  for _, t in ipairs(model.inits) do
    inits[t.name] = true
    local v = tensor_value(t, string.format("initializer '%s'", t.name))
    v.name, v.is_init = t.name, true
    vals[t.name] = v
  end
  for _, inp in ipairs(model.inputs) do
    if not inits[inp.name] then
      local what = string.format("input '%s'", inp.name)
      local frozen = opts.freeze[inp.name]
      if frozen then
        opts.freeze[inp.name] = nil
        local v = tensor_value(frozen, what .. " (--freeze)")
        v.init, v.name = nil, inp.name
        vals[inp.name] = v
      else
        local dt = kiln_dtype[inp.dtype]
        if not dt then fail("%s: unsupported dtype %s", what, onnx_dtype_names[inp.dtype] or tostring(inp.dtype)) end
        if not inp.dims then fail("%s: no shape in the model (Kiln needs static shapes)", what) end
        local zero = false
        for _, d in ipairs(inp.dims) do zero = zero or d == 0 end
        if zero then   -- always empty, so its (no) values are known: a constant, not a run-time input
          line(string.format("-- graph input '%s' is empty (a dim of 0): not an input of the Kiln model", inp.name:gsub("%c", "?")))
          vals[inp.name] = {shape = copy(inp.dims), dt = dt, k = {}, empty = what, name = inp.name}
          goto continue
        end
        local shape = {}
        for i, d in ipairs(inp.dims) do
          if type(d) == "string" then
            local s = opts.defines[d]
            if not s then fail("%s: dim %d is the dynamic dim '%s': give its size with -D %s=N", what, i - 1, d, d) end
            local n = math.tointeger(tonumber(s))
            if not n or n < 1 then fail("-D %s=%s: a size must be an integer >= 1", d, s) end
            shape[i] = n
          elseif d < 1 then fail("%s: dim %d is %d (Kiln has no empty tensors)", what, i - 1, d)
          else shape[i] = d end
        end
        if #shape > 8 then fail("%s: rank %d is not supported (Kiln allows at most 8)", what, #shape) end
        local total = 1
        for _, d in ipairs(shape) do
          total = total * math.min(d, 1 << 31)
          if total > 2147483647 then fail("%s: shape %s is too large to import (Kiln's limit is 2^31 - 1 elements)", what, shape_lua(shape)) end
        end
        local cn = c_name(inp.name)
        local id = lua_name(inp.name)
        line(string.format("%skiln.input(%q, %s%s)%s", assign(id), cn, shape_lua(shape),
          dt == "f32" and "" or string.format(", %q", dt), io_note(inp.dtype, "pass")))
        vals[inp.name] = {shape = shape, dt = dt, ref = bind(id), name = inp.name, odt = carried[inp.dtype] and inp.dtype}
      end
    end
    ::continue::
  end
  local extra = next(opts.freeze)
  if extra then fail("--freeze %s: the model has no graph input of that name", extra) end
  for name in pairs(opts.defines) do
    local found = false
    for _, inp in ipairs(model.inputs) do
      for _, d in ipairs(inp.dims or {}) do found = found or d == name end
    end
    if not found then fail("-D %s: no input has a dynamic dim of that name", name) end
  end
end

local function main()
  local header = {
    string.format("-- %s.lua: imported by `kiln import` from %s (%s): one line per ONNX node,", opts.name,
      opts.file:gsub("%c", "?"), opset == 0 and "ONNX training ops, opset 1" or "ONNX opset " .. opset),
    "-- the ONNX op type in the comment. Build it with `kiln build` like any model script.",
    "local kiln = require \"kiln\"",
  }
  declare_inputs()
  for i, node in ipairs(model.nodes) do translate_node(node, i) end
  local outs = {}
  for _, o in ipairs(model.outputs) do
    local v = vals[o.name]
    if not v then fail("graph output '%s' is produced by no node", o.name) end
    outs[#outs + 1] = string.format("kiln.output(%q, %s)%s", c_name(o.name), ref(v), io_note(o.dtype, "here"))
  end
  for _, s in ipairs(outs) do line(s) end
  if #weights > 0 then header[#header + 1] = string.format("kiln.load(%q, {strict = true})", opts.name .. ".safetensors") end
  if use_table then header[#header + 1] = "local v = {}   -- the graph's values (more than Lua's 200 locals)" end
  if wrap_used then
    for _, l in ipairs({
      "-- ONNX's 8- and 16-bit integers are carried as int32: x modulo 2^bits into the type's range",
      "-- (signed: two's complement), what the narrow type's arithmetic gives. q is within 1 of",
      "-- floor(x / 2^bits) (float32(x) errs by at most 2^7), and the two wheres correct it.",
      "local function onnx_wrap(x, bits, signed)",
      "  local m = 1 << bits",
      "  local q = kiln.floor(kiln.cast(x, \"f32\") / m)",
      "  local r = x - kiln.cast(q, \"i32\") * m",
      "  r = kiln.where(r:lt(0), r + m, r)",
      "  r = kiln.where(r:ge(m), r - m, r)",
      "  if signed then r = kiln.where(r:ge(m // 2), r - m, r) end",
      "  return r",
      "end",
    }) do header[#header + 1] = l end
  end
  local text = table.concat(header, "\n") .. "\n" .. table.concat(lines, "\n") .. "\n"
  return text, weights
end

return main()
