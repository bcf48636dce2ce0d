-- onnx_shape.lua — the shape and indexing ONNX ops of `kiln import`: reshapes, slices,
-- gathers and scatters, concatenation, padding, and the constants Shape, Constant, Range
-- make (most of them also fold at import time, the exporters' Shape -> Gather -> Concat
-- chains). Same conventions as onnx_ops.lua, which defines op, fold_limit and
-- scalar_input and runs first.
local C = ...
local H, fold, N, vals, opset = C.H, C.fold, C.N, C.vals, C.opset
local fail, who, input, need_input, attr = C.fail, C.who, C.input, C.need_input, C.attr
local const_input, need_dt, out, out_const, only_outputs = C.const_input, C.need_dt, C.out, C.out_const, C.only_outputs
local ref, arg, num, numel, shape_lua, ints_lua = C.ref, C.arg, C.num, C.numel, C.shape_lua, C.ints_lua
local copy, bcast, axis_of, strides = C.copy, C.bcast, C.axis_of, C.strides
local line, bind, lua_name, use_table = C.line, C.bind, C.lua_name, C.use_table
local kiln_dtype, onnx_dtype_names, tensor_value, convert_values = C.kiln_dtype, C.onnx_dtype_names, C.tensor_value,
  C.convert_values

local op, fold_limit, scalar_input = C.op, C.fold_limit, C.scalar_input

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
    elseif d == 0 then fail("%s: shape entry %d is 0: an empty tensor (Kiln has no empty tensors)", who(), i)
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
local function slice_spec(allow_empty)
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
    if shape[d + 1] == 0 and not allow_empty then fail("%s: an empty slice (Kiln has no empty tensors)", who()) end
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
  local x, spec, shape = slice_spec(true)   -- an empty constant may still fold on
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

op("GatherND", "batch_dims", function()
  local x, idx = need_input(1, "data"), need_input(2, "indices")
  need_dt(idx, "i32", "indices")
  local b = attr("batch_dims", "i", 0)
  local q = idx.shape[#idx.shape]
  if b < 0 or b >= #idx.shape or b + q > #x.shape then fail("%s: batch_dims %d and index tuples of %d for ranks %d and %d", who(), b, q, #x.shape, #idx.shape) end
  for j = 1, b do
    if x.shape[j] ~= idx.shape[j] then fail("%s: batch dim %d is %d in data, %d in indices", who(), j - 1, x.shape[j], idx.shape[j]) end
  end
  -- each index tuple becomes one flat index into data's batch dims and the q dims after
  -- them (viewed as one dim): the tuple's batch position times the q dims' size, plus
  -- the tuple's components times their strides
  local strides_, acc = {}, 1
  for j = b + q, b + 1, -1 do strides_[j] = acc; acc = acc * x.shape[j] end
  local nb = 1
  for j = 1, b do nb = nb * x.shape[j] end
  local flat = {nb * acc}
  for j = b + q + 1, #x.shape do flat[#flat + 1] = x.shape[j] end
  local shape = {}
  for j = 1, #idx.shape - 1 do shape[j] = idx.shape[j] end
  for j = b + q + 1, #x.shape do shape[#shape + 1] = x.shape[j] end
  local i, last = ref(idx), #idx.shape - 1
  local terms = {}
  for j = b + 1, b + q do   -- component j, negative counting from the end, times its stride
    local comp = string.format("%s:select(%d, %d)", i, last, j - b - 1)
    terms[#terms + 1] = string.format("kiln.where(%s:lt(0), %s + %d, %s) * %d", comp, comp, x.shape[j], comp, strides_[j])
  end
  if b > 0 then
    local bshape = {}
    for j = 1, #idx.shape - 1 do bshape[j] = j <= b and idx.shape[j] or 1 end
    terms[#terms + 1] = string.format("kiln.arange(%d):reshape(%s) * %d", nb, shape_lua(bshape), acc)
  end
  local lin = table.concat(terms, " + ")
  out(1, string.format("kiln.gather(%s:reshape(%s), %s, 0)", ref(x), shape_lua(flat), lin), shape, x.dt)
end)

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
  local t, f, fs = attr("value", "t", nil), attr("value_float", "f", nil), attr("value_floats", "floats", nil)
  local i, is = attr("value_int", "i", nil), attr("value_ints", "ints", nil)
  if t then
    local v = tensor_value(t, who())
    vals[N.node.outputs[1]] = v
    v.name = N.node.outputs[1]
  elseif f then out_const(1, {f}, {}, "f32")
  elseif fs then out_const(1, copy(fs), {#fs}, "f32")
  elseif i then out_const(1, convert_values({i}, 7, "i32", who()), {}, "i32")
  elseif is then out_const(1, convert_values(is, 7, "i32", who()), {#is}, "i32")
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
  if not bs or bs < 1 then fail("%s: needs a blocksize >= 1", who()) end
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

-- ---- padding and one-hot ----

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
-- reduction "mul": data times the updates that hit each element, in update order: the
-- k-th update of every element gathered from the updates (and a trailing 1 for an
-- element hit fewer than k times), one product per k.
local function scatter_mul(data, updates, places)
  local nd, nu = numel(data.shape), numel(updates.shape)
  local hits = {}
  for i = 1, nd do hits[i] = {} end
  local depth = 0
  for u, p in ipairs(places) do
    local h = hits[p + 1]
    h[#h + 1] = u - 1
    depth = math.max(depth, #h)
  end
  fold_limit(nd * depth)
  local base = N.node.outputs[1]
  local ext = lua_name(base .. "_factors")
  line(string.format("%skiln.concat({%s:reshape({%d}), kiln.full({1}, 1)}, 0)  -- ScatterND: the updates, then 1",
    C.assign(ext), ref(updates), nu))
  local e = ref(data)
  for k = 1, depth do
    local g = {}
    for i = 1, nd do g[i] = hits[i][k] or nu end
    local gi = ref({shape = {nd}, dt = "i32", k = g, name = string.format("%s_hit%d", base, k)})
    e = string.format("%s * kiln.gather(%s, %s, 0):reshape(%s)", e, bind(ext), gi, shape_lua(data.shape))
  end
  return e
end

local function scatter_out(data, updates, places, reduction)
  if reduction == "mul" then return scatter_mul(data, updates, places) end
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

-- Contract: MaxPool or AveragePool (the current node) of any spatial rank and dilation,
-- and MaxPool's Indices output, written as strided slices of the padded input (xs: x's
-- expression, as float32): a max without Indices one spatial dim after another, else one
-- slice per kernel tap: the max of the taps (the first largest
-- tap gives the index, a flat index into x (g.col_major: spatial dims column-major, as
-- storage_order 1 numbers them), carried in float32: exact below
-- 2^24), or their sum over the taps counted (all of them, or only those inside x when
-- count_include_pad is 0, from the same taps of a padded mask of ones). g: the geometry
-- the handler computed (k, s, d, pb, pe, output shape, avg, count_pad, indices, to_i32).
function C.pool_taps(x, xs, g)
  local r = #g.k
  local pads, padded = {}, false
  for i = r, 1, -1 do
    pads[#pads + 1], pads[#pads + 2] = g.pb[i], g.pe[i]
    padded = padded or g.pb[i] > 0 or g.pe[i] > 0
  end
  local out_name = N.node.outputs[1]
  local function pad(e, value, what)
    if not padded then return e end
    local id = lua_name(out_name .. "_" .. what)
    line(string.format("%skiln.pad(%s, %s, \"constant\", %s)  -- %s: padded for its taps", C.assign(id), e, ints_lua(pads),
      value, N.node.op))
    return bind(id)
  end
  -- the tap t (0-based per dim) of src: every output position's element at that tap
  -- e's elements at tap t of spatial dim i, for every output position along that dim
  local function along(e, i, t)
    local start = t * g.d[i]
    return string.format("kiln.slice(%s, %d, %d, %d, %d)", e, 1 + i, start, start + (g.shape[2 + i] - 1) * g.s[i] + 1, g.s[i])
  end
  local function tap(src, t)
    local e = src
    for i = 1, r do e = along(e, i, t[i]) end
    return e
  end
  local src = pad(xs, g.avg and "0" or "-math.huge", "padded")
  if not g.avg and not g.indices then
    -- A box's max is the max along one dim after another: sum(k) taps instead of prod(k)
    -- (a 60 x 80 dilated window was 4,800 slices). fmax is exact and a NaN loses to a
    -- number in any order, so the values are the same (a zero's sign aside: fmax may
    -- return either of -0 and +0, in any grouping).
    local cur = src
    for i = 1, r do
      local acc = lua_name(out_name .. "_max")
      line(string.format("%s%s  -- %s: spatial dim %d of %d, tap 1 of %d", C.assign(acc), along(cur, i, 0), N.node.op, i, r, g.k[i]))
      local accr = bind(acc)
      for t = 1, g.k[i] - 1 do line(string.format("%s = kiln.max(%s, %s)", accr, accr, along(cur, i, t))) end   -- dims before i are output-sized already
      cur = accr
    end
    out(1, g.to_i32 and string.format("kiln.cast(%s, \"i32\")", cur) or cur, g.shape, g.to_i32 and "i32" or "f32")
    return
  end
  local taps, n = {}, 1
  for i = 1, r do n = n * g.k[i] end
  for j = 0, n - 1 do
    local t, rem = {}, j
    for i = r, 1, -1 do t[i] = rem % g.k[i]; rem = rem // g.k[i] end
    taps[#taps + 1] = t
  end
  local acc = lua_name(out_name .. (g.avg and "_sum" or "_max"))
  line(string.format("%s%s  -- %s: tap 1 of %d", C.assign(acc), tap(src, taps[1]), N.node.op, n))
  local accr = bind(acc)
  local idx, idxr
  if g.indices then
    if numel(x.shape) >= 1 << 24 then fail("%s: Indices of an input of %d elements are not supported (float32 holds them exactly below 2^24)", who(), numel(x.shape)) end
    -- flat indices of x: row-major, or with storage_order 1 the spatial dims column-major
    local ishape, perm = {x.shape[1], x.shape[2]}, {0, 1}
    for i = 1, r do
      ishape[2 + i] = g.col_major and x.shape[3 + r - i] or x.shape[2 + i]
      perm[2 + i] = g.col_major and 2 + r - i or 1 + i
    end
    local ie = string.format("kiln.cast(kiln.arange(%d), \"f32\"):reshape(%s)", numel(x.shape), shape_lua(ishape))
    if g.col_major then ie = string.format("kiln.permute(%s, %s)", ie, ints_lua(perm)) end
    local isrc = pad(ie, "-1", "index")
    idx = lua_name(N.node.outputs[2] .. "_at")
    line(string.format("%s%s  -- MaxPool: the index of each tap 1", C.assign(idx), tap(isrc, taps[1])))
    idxr = bind(idx)
    for j = 2, n do
      local v = tap(src, taps[j])
      local take = lua_name(out_name .. "_larger")
      line(string.format("%skiln.gt(%s, %s)  -- MaxPool: tap %d is larger", C.assign(take), v, accr, j))
      line(string.format("%s = kiln.where(%s, %s, %s)", idxr, bind(take), tap(isrc, taps[j]), idxr))
      line(string.format("%s = kiln.where(%s, %s, %s)", accr, bind(take), v, accr))
    end
  else
    for j = 2, n do
      line(string.format(g.avg and "%s = %s + %s" or "%s = kiln.max(%s, %s)", accr, accr, tap(src, taps[j])))
    end
  end
  local e = accr
  if g.avg then
    if g.count_pad or not padded then e = string.format("%s / %d", accr, n)
    else
      local ones = pad(string.format("kiln.full(%s, 1)", shape_lua(x.shape)), "0", "inside")
      local cnt = {}
      for j = 1, n do cnt[j] = tap(ones, taps[j]) end
      e = string.format("%s / (%s)", accr, table.concat(cnt, " + "))
    end
  end
  if g.to_i32 then e = string.format("kiln.cast(%s, \"i32\")", e) end
  out(1, e, g.shape, g.to_i32 and "i32" or "f32")
  if g.indices then out(2, string.format("kiln.cast(%s, \"i32\")", idxr), C.copy(g.shape), "i32") end
end

-- MaxUnpool: X's values stored at their Indices (MaxPool's flat indices into the input it
-- pooled, whose spatial shape is the default unpooled one: (in - 1) * stride - pads +
-- kernel) in a zero tensor of output_shape (or that default). An index is decoded into
-- its coordinates in the default shape and re-encoded in the output's (integer remainders,
-- and exact float32 quotients below 2^24), then one kiln.scatter over the flat output.
op("MaxUnpool", "kernel_shape pads strides", function()
  local x, iv = need_input(1, "X"), need_input(2, "I")
  need_dt(x, "f32", "X")
  need_dt(iv, "i32", "I")
  local r = #x.shape - 2
  local k = attr("kernel_shape", "ints", nil)
  if r < 1 or not k or #k ~= r then fail("%s: needs kernel_shape with %d values", who(), r) end
  local s, p = attr("strides", "ints", nil) or {}, attr("pads", "ints", nil) or {}
  local def = {x.shape[1], x.shape[2]}
  for i = 1, r do def[2 + i] = (x.shape[2 + i] - 1) * (s[i] or 1) - (p[i] or 0) - (p[r + i] or 0) + k[i] end
  local shape = copy(def)
  if input(3) then
    local os_ = const_input(3, "output_shape")
    if #os_ ~= #def then fail("%s: output_shape has %d entries for rank %d", who(), #os_, #def) end
    for i = 1, #def do shape[i] = math.tointeger(os_[i]) end
  end
  if shape[1] ~= def[1] or shape[2] ~= def[2] then fail("%s: output_shape must keep N and C", who()) end
  if numel(def) >= 1 << 24 or numel(shape) >= 1 << 24 then fail("%s: more than 2^24 elements are not supported", who()) end
  local t = ref(iv)
  local terms, step = {}, 1
  for d = #def, 3, -1 do   -- the coordinate along spatial dim d, then the rest of the index
    local c = lua_name(string.format("%s_at%d", N.node.outputs[1], d - 1))
    line(string.format("%skiln.remainder(%s, %d)  -- MaxUnpool: the index's coordinate along dim %d", C.assign(c), t, def[d], d - 1))
    terms[#terms + 1] = string.format("%s * %d", bind(c), step)
    step = step * shape[d]
    local rest = lua_name(string.format("%s_rest%d", N.node.outputs[1], d - 1))
    line(string.format("%skiln.cast((kiln.cast(%s - %s, \"f32\") / %d), \"i32\")", C.assign(rest), t, bind(c), def[d]))
    t = bind(rest)
  end
  terms[#terms + 1] = string.format("%s * %d", t, step)   -- n * C + c, above every spatial dim
  local n = numel(x.shape)
  local e = string.format("kiln.scatter(kiln.full({1, %d}, 0), 1, (%s):reshape({1, %d}), %s:reshape({1, %d})):reshape(%s)",
    numel(shape), table.concat(terms, " + "), n, ref(x), n, shape_lua(shape))
  out(1, e, shape, "f32")
end)
