-- onnx_quant.lua — the ONNX op handlers of `kiln import` for integer and quantized
-- arithmetic (Mod, BitShift, QuantizeLinear and its kin, the integer products) and for
-- ONNX's training optimizers (ai.onnx.preview.training). onnx_ops.lua's conventions hold:
-- H[op] = {attrs, f}; onnx.lua carries ONNX's narrow integers as int32 (a value's odt) and
-- wraps their arithmetic, so these handlers see int32 tensors and their ONNX dtype codes.
local C = ...
local N, vals = C.N, C.vals
local fail, who, input, need_input, attr = C.fail, C.who, C.input, C.need_input, C.attr
local need_dt, out, ref, arg, num = C.need_dt, C.out, C.ref, C.arg, C.num
local bcast, axis_of, shape_lua, ints_lua = C.bcast, C.axis_of, C.shape_lua, C.ints_lua
local line, bind, lua_name, op = C.line, C.bind, C.lua_name, C.op
local small_int, trunc_div, conv, matmul_shape = C.small_int, C.trunc_div, C.conv, C.matmul_shape

-- Mod: kiln.fmod (fmod = 1: C's fmod, the sign of the dividend) or kiln.remainder (0:
-- Python's %, the sign of the divisor), both exact, so the result has the operands' ONNX
-- type (onnx.lua keeps it: a remainder is never wider than its operands, and fmod of
-- float16 values is a float16 value). ONNX allows only fmod = 1 for floats.
op("Mod", "fmod", function()
  local a, b = need_input(1, "A"), need_input(2, "B")
  local f = attr("fmod", "i", 0)
  if a.dt ~= b.dt or a.dt == "bool" then fail("%s: inputs of dtypes %s and %s", who(), a.dt, b.dt) end
  if a.dt == "f32" and f ~= 1 then fail("%s: fmod = 0 with floats is not allowed by ONNX", who()) end
  out(1, string.format("kiln.%s(%s, %s)", f == 1 and "fmod" or "remainder", ref(a), ref(b)), bcast(a.shape, b.shape, who()),
    a.dt)
end)

-- BitShift. uint8/uint16: x * 2^y (wrapped to the width by onnx.lua) or trunc(x / 2^y),
-- with 2^y from a table of exact powers (y clamped to the width: x * 2^bits wraps to 0,
-- and x / 2^bits truncates to 0, as any larger shift does). uint32/uint64 (values below
-- 2^31, onnx.lua): only right shifts — a left shift can pass 2^31 — split into 16-bit
-- halves so that each quotient is exact in float32: x = hi * 2^16 + lo, and x >> y is
-- hi * 2^(16 - y) + (lo >> y) up to y = 16, hi >> (y - 16) beyond.
local function pow2(e, top)   -- 2^e for an int32 tensor expression e, clamped to [0, top]
  local pows = {}
  for i = 0, top do pows[#pows + 1] = tostring(1 << i) end
  return string.format("kiln.gather(kiln.constant({%s}, {%d}, \"i32\"), kiln.max(kiln.min(%s, %d), 0), 0)",
    table.concat(pows, ", "), top + 1, e, top)
end

op("BitShift", "direction", function()
  local x, y = need_input(1, "X"), need_input(2, "Y")
  local d = attr("direction", "s", nil)
  if d ~= "LEFT" and d ~= "RIGHT" then fail("%s: direction must be \"LEFT\" or \"RIGHT\"", who()) end
  local cx = x.odt and C.carried[x.odt]
  if not cx or not cx.bits or cx.signed then fail("%s: BitShift of %s is not supported", who(), x.dt) end
  local shape = bcast(x.shape, y.shape, who())
  if cx.bits <= 16 then
    local p = pow2(ref(y), cx.bits)
    if d == "LEFT" then out(1, string.format("%s * %s", ref(x), p), shape, "i32")
    else out(1, trunc_div(ref(x), p), shape, "i32") end
    return
  end
  if d == "LEFT" then
    fail("%s: a left shift of %s is not supported (its result can pass 2^31, past Kiln's int32)", who(),
      C.onnx_dtype_names[x.odt])
  end
  local base = N.node.outputs[1]
  local lo, hi = lua_name(base .. "_lo"), lua_name(base .. "_hi")
  line(string.format("%skiln.remainder(%s, 65536)  -- BitShift: the low 16 bits", C.assign(lo), ref(x)))
  line(string.format("%skiln.cast(kiln.cast(%s - %s, \"f32\") / 65536, \"i32\")  -- BitShift: the high bits",
    C.assign(hi), ref(x), bind(lo)))
  local ys = ref(y)
  local small = string.format("%s * %s + %s", bind(hi), pow2("(16 - " .. ys .. ")", 16), trunc_div(bind(lo), pow2(ys, 16)))
  local big = trunc_div(bind(hi), pow2("(" .. ys .. " - 16)", 16))
  out(1, string.format("kiln.where(kiln.le(%s, 16), %s, %s)", ys, small, big), shape, "i32")
end)

-- ---- quantization ----
-- ONNX's 8-bit quantized values arrive as int32 (onnx.lua carries them). Integer products
-- (MatMulInteger, ConvInteger and the QLinear ops' accumulations) are computed in float32,
-- exactly: every term (a - a_zero) * (b - b_zero) is at most 255 * 255 in magnitude, so
-- with K terms per sum every partial sum is an integer below 2^24 when K <= 258 — which
-- the importer checks from the static shapes, refusing a longer sum.

local function need_int8(v, what)
  if not v or not v.odt or (v.odt ~= 2 and v.odt ~= 3) then
    fail("%s: %s must be uint8 or int8 (%s)", who(), what, v and (v.odt and C.onnx_dtype_names[v.odt] or v.dt) or "absent")
  end
end

-- v (a scalar or a 1-D tensor of per-slice values) as float32, shaped to broadcast along
-- dim axis of a rank-r tensor (axis as ONNX gives it, checked only when it matters).
local function per_axis(v, axis, r)
  local e = v.dt == "f32" and arg(v) or string.format("kiln.cast(%s, \"f32\")", ref(v))
  if #v.shape == 0 or (#v.shape == 1 and v.shape[1] == 1) then return e end
  if #v.shape ~= 1 then fail("%s: a scale or zero point must be a scalar or 1-D", who()) end
  axis = axis_of(axis, r, who())
  local s = {}
  for i = 1, r do s[i] = i == axis + 1 and v.shape[1] or 1 end
  return string.format("%s:reshape(%s)", e, shape_lua(s))
end

local function exact_sum(k)
  if k > 258 then
    fail("%s: sums of %d products of 8-bit integers are not supported (Kiln computes them in float32, exact up to 258)", who(), k)
  end
end

-- Defines output i as an 8-bit integer of ONNX dtype code (uint8 unless int8), from the
-- float32 expression e: rounded half to even and saturated, as QuantizeLinear does.
local function out_quantized(i, e, shape, code)
  local lo, hi = code == 3 and -128 or 0, code == 3 and 127 or 255
  out(i, string.format("kiln.cast(kiln.clamp(kiln.round(%s), %d, %d), \"i32\")", e, lo, hi), shape, "i32")
  if vals[N.node.outputs[i]] then vals[N.node.outputs[i]].odt = code end
end

op("DequantizeLinear", "axis", function()
  local x, s, z = need_input(1, "x"), need_input(2, "x_scale"), input(3)
  need_dt(s, "f32", "x_scale")
  if x.dt ~= "i32" then fail("%s: x must be an integer tensor", who()) end
  local axis = attr("axis", "i", 1)
  local xs = string.format("kiln.cast(%s, \"f32\")", ref(x))
  if z then xs = string.format("(%s - %s)", xs, per_axis(z, axis, #x.shape)) end
  out(1, string.format("%s * %s", xs, per_axis(s, axis, #x.shape)), x.shape, "f32")
end)

op("QuantizeLinear", "axis", function()
  local x, s, z = need_input(1, "x"), need_input(2, "y_scale"), input(3)
  need_dt(x, "f32", "x")
  need_dt(s, "f32", "y_scale")
  if z then need_int8(z, "y_zero_point") end
  local axis = attr("axis", "i", 1)
  local e = string.format("kiln.round(%s / %s)", ref(x), per_axis(s, axis, #x.shape))
  if z then e = string.format("%s + %s", e, per_axis(z, axis, #x.shape)) end
  out_quantized(1, e, x.shape, z and z.odt or 2)
end)

op("DynamicQuantizeLinear", "", function()
  local x = need_input(1, "x")
  need_dt(x, "f32", "x")
  local all = {}
  for i = 1, #x.shape do all[i] = i - 1 end
  local base = lua_name(N.node.outputs[1] .. "_range")
  -- the range of x widened to hold 0, over 255 steps; the zero point is where 0 falls
  line(string.format("%skiln.max(kiln.amax(%s, %s), 0) - kiln.min(kiln.amin(%s, %s), 0)  -- DynamicQuantizeLinear", C.assign(base),
    ref(x), ints_lua(all), ref(x), ints_lua(all)))
  local scale = string.format("(%s / 255)", bind(base))
  out(2, scale, {}, "f32")
  local sref = vals[N.node.outputs[2]] and vals[N.node.outputs[2]].ref or scale
  local zp = string.format("kiln.clamp(kiln.round(-kiln.min(kiln.amin(%s, %s), 0) / %s), 0, 255)", ref(x), ints_lua(all), sref)
  out_quantized(3, zp, {}, 2)
  out_quantized(1, string.format("kiln.round(%s / %s) + %s", ref(x), sref, zp), x.shape, 2)
end)

op("MatMulInteger", "", function()
  local a, b, az, bz = need_input(1, "A"), need_input(2, "B"), input(3), input(4)
  need_int8(a, "A")
  need_int8(b, "B")
  local shape = matmul_shape(a.shape, b.shape)
  exact_sum(a.shape[#a.shape])
  local as = string.format("kiln.cast(%s, \"f32\")", ref(a))
  local bs = string.format("kiln.cast(%s, \"f32\")", ref(b))
  -- a_zero_point: per row of A (its dim -2); b_zero_point: per column of B (its last dim)
  if az then as = string.format("(%s - %s)", as, per_axis(az, -2, #a.shape)) end
  if bz then bs = string.format("(%s - %s)", bs, per_axis(bz, -1, #b.shape)) end
  out(1, string.format("kiln.cast(kiln.matmul(%s, %s), \"i32\")", as, bs), shape, "i32")
end)

-- QLinearMatMul: the exact integer product (as MatMulInteger) times a_scale * b_scale /
-- y_scale in float32, requantized to y_zero_point's type (as ONNX Runtime computes it).
op("QLinearMatMul", "", function()
  local a, as_, az = need_input(1, "a"), need_input(2, "a_scale"), need_input(3, "a_zero_point")
  local b, bs_, bz = need_input(4, "b"), need_input(5, "b_scale"), need_input(6, "b_zero_point")
  local ys, yz = need_input(7, "y_scale"), need_input(8, "y_zero_point")
  need_int8(a, "a")
  need_int8(b, "b")
  need_int8(yz, "y_zero_point")
  local shape = matmul_shape(a.shape, b.shape)
  exact_sum(a.shape[#a.shape])
  local ae = string.format("(kiln.cast(%s, \"f32\") - %s)", ref(a), per_axis(az, -2, #a.shape))
  local be = string.format("(kiln.cast(%s, \"f32\") - %s)", ref(b), per_axis(bz, -1, #b.shape))
  local scale = string.format("(%s * %s / %s)", per_axis(as_, -2, #a.shape), per_axis(bs_, -1, #b.shape), per_axis(ys, 0, 1))
  out_quantized(1, string.format("kiln.matmul(%s, %s) * %s + %s", ae, be, scale, per_axis(yz, 0, 1)), shape, yz.odt)
end)

op("ConvInteger", "auto_pad dilations group kernel_shape pads strides", function()
  local x, w, xz, wz = need_input(1, "x"), need_input(2, "w"), input(3), input(4)
  need_int8(x, "x")
  need_int8(w, "w")
  local k = 1
  for i = 2, #w.shape do k = k * w.shape[i] end
  exact_sum(k)
  -- padding adds zeros to x - x_zero_point, as ONNX pads with the zero point
  local xs = string.format("kiln.cast(%s, \"f32\")", ref(x))
  local ws = string.format("kiln.cast(%s, \"f32\")", ref(w))
  if xz then xs = string.format("(%s - %s)", xs, per_axis(xz, 1, #x.shape)) end
  if wz then ws = string.format("(%s - %s)", ws, per_axis(wz, 0, #w.shape)) end
  local e, shape = conv(x, w, nil, xs, ws)
  out(1, string.format("kiln.cast(%s, \"i32\")", e), shape, "i32")
end)

-- QLinearConv: ConvInteger's exact sum (+ the int32 bias, while the total stays below 2^24) times
-- x_scale * w_scale / y_scale, requantized as QLinearMatMul.
op("QLinearConv", "auto_pad dilations group kernel_shape pads strides", function()
  local x, xs_, xz = need_input(1, "x"), need_input(2, "x_scale"), need_input(3, "x_zero_point")
  local w, ws_, wz = need_input(4, "w"), need_input(5, "w_scale"), need_input(6, "w_zero_point")
  local ys, yz, b = need_input(7, "y_scale"), need_input(8, "y_zero_point"), input(9)
  need_int8(x, "x")
  need_int8(w, "w")
  need_int8(yz, "y_zero_point")
  local k = 1
  for i = 2, #w.shape do k = k * w.shape[i] end
  exact_sum(k)
  local xe = string.format("(kiln.cast(%s, \"f32\") - %s)", ref(x), per_axis(xz, 1, #x.shape))
  local we = string.format("(kiln.cast(%s, \"f32\") - %s)", ref(w), per_axis(wz, 0, #w.shape))
  local e, shape = conv(x, w, nil, xe, we)
  if b then
    if not b.k then fail("%s: the bias B must be known at import time", who()) end
    for _, v in ipairs(b.k) do   -- the biased sum stays an integer float32 holds exactly
      if k * 255 * 255 + math.abs(v) > 1 << 24 then
        fail("%s: a bias of %d is not supported (the sum would pass 2^24, float32's exact integers)", who(), v)
      end
    end
    e = string.format("%s + %s", e, per_axis(b, 1, #shape))
  end
  local scale = string.format("(%s * %s / %s)", per_axis(xs_, 0, 1), per_axis(ws_, 1, #shape), per_axis(ys, 0, 1))
  out_quantized(1, string.format("(%s) * %s + %s", e, scale, per_axis(yz, 0, 1)), shape, yz.odt)
end)

-- ---- ai.onnx.preview.training: one optimizer step, as ONNX defines it ----
-- Inputs R (learning rate), T (the iteration count), then the tensors X..., their
-- gradients G... and their states (H..., V...), n of each; outputs the new X... then the
-- new states. norm_coefficient adds L2 regularisation to each gradient.

local function optimizer_inputs(nstate)
  local nin = #N.node.inputs - 2
  if nin < 1 or nin % (2 + nstate) ~= 0 then fail("%s: %d inputs do not make R, T and groups of %d", who(), nin + 2, 2 + nstate) end
  local r, t = need_input(1, "R"), need_input(2, "T")
  need_dt(r, "f32", "R")
  need_dt(t, "i32", "T")
  return nin // (2 + nstate), ref(r), ref(t)
end

op("Adagrad", "decay_factor epsilon norm_coefficient", function()
  local n, r, t = optimizer_inputs(1)
  local decay, eps = num(attr("decay_factor", "f", 0.0), "f32"), num(attr("epsilon", "f", 0.0), "f32")
  local norm = num(attr("norm_coefficient", "f", 0.0), "f32")
  local rate = lua_name("adagrad_rate")
  line(string.format("%s%s / (kiln.cast(%s, \"f32\") * %s + 1)  -- Adagrad: the decayed learning rate", C.assign(rate), r, t, decay))
  for i = 1, n do
    local x, g, h = need_input(2 + i, "X"), need_input(2 + n + i, "G"), need_input(2 + 2 * n + i, "H")
    local gr = lua_name(N.node.outputs[i] .. "_grad")
    line(string.format("%s%s * %s + %s  -- Adagrad: the regularised gradient", C.assign(gr), norm, ref(x), ref(g)))
    out(n + i, string.format("%s + %s * %s", ref(h), bind(gr), bind(gr)), x.shape, "f32")
    local hn = vals[N.node.outputs[n + i]] and vals[N.node.outputs[n + i]].ref or
      string.format("(%s + %s * %s)", ref(h), bind(gr), bind(gr))
    out(i, string.format("%s - %s * %s / (kiln.sqrt(%s) + %s)", ref(x), bind(rate), bind(gr), hn, eps), x.shape, "f32")
  end
end)

op("Momentum", "alpha beta mode norm_coefficient", function()
  local n, r, t = optimizer_inputs(1)
  local alpha, beta = num(attr("alpha", "f", 0.0), "f32"), num(attr("beta", "f", 0.0), "f32")
  local norm = num(attr("norm_coefficient", "f", 0.0), "f32")
  local mode = attr("mode", "s", "standard")
  if mode ~= "standard" and mode ~= "nesterov" then fail("%s: mode \"%s\" is not supported", who(), mode) end
  -- the first step (T = 0) takes the whole gradient: beta is 1 there
  local b = lua_name("momentum_beta")
  line(string.format("%skiln.where(kiln.gt(%s, 0), %s, 1)  -- Momentum: beta, 1 on the first step", C.assign(b), t, beta))
  for i = 1, n do
    local x, g, v = need_input(2 + i, "X"), need_input(2 + n + i, "G"), need_input(2 + 2 * n + i, "V")
    local gr = lua_name(N.node.outputs[i] .. "_grad")
    line(string.format("%s%s * %s + %s  -- Momentum: the regularised gradient", C.assign(gr), norm, ref(x), ref(g)))
    local vn = string.format("%s * %s + %s * %s", alpha, ref(v), bind(b), bind(gr))
    out(n + i, vn, x.shape, "f32")
    vn = vals[N.node.outputs[n + i]] and vals[N.node.outputs[n + i]].ref or "(" .. vn .. ")"
    if mode == "standard" then out(i, string.format("%s - %s * %s", ref(x), r, vn), x.shape, "f32")
    else out(i, string.format("%s - %s * (%s + %s * %s)", ref(x), r, bind(gr), alpha, vn), x.shape, "f32") end
  end
end)

op("Adam", "alpha beta epsilon norm_coefficient norm_coefficient_post", function()
  local n, r, t = optimizer_inputs(2)
  local alpha, beta = attr("alpha", "f", 0.9), attr("beta", "f", 0.999)
  local eps, norm = num(attr("epsilon", "f", 0.0), "f32"), num(attr("norm_coefficient", "f", 0.0), "f32")
  local post = attr("norm_coefficient_post", "f", 0.0)
  -- the bias-corrected rate from the second step on: R sqrt(1 - beta^T) / (1 - alpha^T)
  local rate, tf = lua_name("adam_rate"), string.format("kiln.cast(%s, \"f32\")", t)
  line(string.format("%skiln.where(kiln.gt(%s, 0), %s * kiln.sqrt(1 - kiln.pow(%s, %s)) / (1 - kiln.pow(%s, %s)), %s)  -- Adam",
    C.assign(rate), t, r, num(beta, "f32"), tf, num(alpha, "f32"), tf, r))
  for i = 1, n do
    local x, g = need_input(2 + i, "X"), need_input(2 + n + i, "G")
    local v, h = need_input(2 + 2 * n + i, "V"), need_input(2 + 3 * n + i, "H")
    local gr = lua_name(N.node.outputs[i] .. "_grad")
    line(string.format("%s%s * %s + %s  -- Adam: the regularised gradient", C.assign(gr), norm, ref(x), ref(g)))
    out(n + i, string.format("%s * %s + %s * %s", num(alpha, "f32"), ref(v), num(1 - alpha, "f32"), bind(gr)), x.shape, "f32")
    out(2 * n + i, string.format("%s * %s + %s * %s * %s", num(beta, "f32"), ref(h), num(1 - beta, "f32"), bind(gr), bind(gr)),
      x.shape, "f32")
    local vn, hn = vals[N.node.outputs[n + i]], vals[N.node.outputs[2 * n + i]]
    if not vn or not hn then fail("%s: the new V and H outputs are needed", who()) end
    local e = string.format("%s - %s * %s / (kiln.sqrt(%s) + %s)", ref(x), bind(rate), vn.ref, hn.ref, eps)
    if post ~= 0 then e = string.format("(%s) * %s", e, num(1 - post, "f32")) end
    out(i, e, x.shape, "f32")
  end
end)

-- ---- text ----

-- TfIdfVectorizer over integer tokens (pool_int64s): the count of every pool n-gram in
-- each row of X (the last dim), n from min_gram_length to max_gram_length, its tokens
-- skip apart for each skip 0..max_skip_count (a unigram is counted once), placed at
-- ngram_indexes; IDF gives 1 for a present n-gram, and IDF and TFIDF scale by weights.
-- Per n and skip, a tensor [..., L, P] of matches of the L windows against the P pool
-- n-grams, multiplied over the n positions and summed over the windows; the counts of all
-- pool entries are then placed by a 0/1 matrix (integer counts: float32 is exact).
op("TfIdfVectorizer", "max_gram_length max_skip_count min_gram_length mode ngram_counts ngram_indexes pool_int64s " ..
  "pool_strings weights", function()
  local x = need_input(1, "X")
  if x.dt ~= "i32" then fail("%s: X must be an integer tensor (string pools are not supported)", who()) end
  if #x.shape < 1 or #x.shape > 2 then fail("%s: X must be [N] or [B, N]", who()) end
  local lo, hi = attr("min_gram_length", "i", nil), attr("max_gram_length", "i", nil)
  local skip = attr("max_skip_count", "i", 0)
  local mode = attr("mode", "s", nil)
  local counts, indexes = attr("ngram_counts", "ints", nil), attr("ngram_indexes", "ints", nil)
  local pool, weights = attr("pool_int64s", "ints", nil), attr("weights", "floats", nil)
  attr("pool_strings", "strings", nil)
  if not pool then fail("%s: only pool_int64s (integer tokens) is supported", who()) end
  for _, v in ipairs(pool) do
    if v < -2147483648 or v > 2147483647 then fail("%s: pool token %d does not fit int32 (Kiln's integers are 32-bit)", who(), v) end
  end
  if not (lo and hi and counts and indexes) or lo < 1 or hi < lo or hi > #counts or skip < 0 then
    fail("%s: needs min_gram_length <= max_gram_length <= #ngram_counts and ngram_indexes", who())
  end
  if mode ~= "TF" and mode ~= "IDF" and mode ~= "TFIDF" then fail("%s: mode must be TF, IDF or TFIDF", who()) end
  local n_last = x.shape[#x.shape]
  local width = 0
  for _, v in ipairs(indexes) do width = math.max(width, v + 1) end
  local parts, entry = {}, 0      -- counts per pool entry, in pool order; entry: pool entries so far
  local place = {}                -- place[k] = the output index of pool entry k (1-based)
  for n = 1, #counts do
    local first, last = counts[n], (counts[n + 1] or #pool)
    if last - first < 0 or (last - first) % n ~= 0 then fail("%s: ngram_counts does not cut pool_int64s into %d-grams", who(), n) end
    local p = (last - first) // n
    for k = 1, p do
      entry = entry + 1
      place[entry] = indexes[entry]
      if not place[entry] then fail("%s: ngram_indexes has fewer entries than the pool", who()) end
    end
    if n >= lo and n <= hi and p > 0 then
      local terms = {}
      for s = 0, (n == 1 and 0 or skip) do
        local l = n_last - (n - 1) * (s + 1)
        if l >= 1 then
          local prod = {}
          for j = 0, n - 1 do
            local toks = {}
            for k = 0, p - 1 do toks[#toks + 1] = tostring(pool[first + k * n + j + 1]) end
            prod[#prod + 1] = string.format("kiln.cast(kiln.eq(kiln.slice(%s, -1, %d, %d):unsqueeze(-1), kiln.constant({%s}, {%d}, \"i32\")), \"f32\")",
              ref(x), j * (s + 1), j * (s + 1) + l, table.concat(toks, ", "), p)
          end
          terms[#terms + 1] = string.format("kiln.sum(%s, -2)", table.concat(prod, " * "))
        end
      end
      if #terms > 0 then
        local id = lua_name(string.format("%s_%dgrams", N.node.outputs[1], n))
        line(string.format("%s%s  -- TfIdfVectorizer: %d-gram counts", C.assign(id), table.concat(terms, " + "), n))
        parts[#parts + 1] = {ref = bind(id), from = entry - p, p = p}
      end
    end
  end
  local shape = C.copy(x.shape)
  shape[#shape] = width
  if #parts == 0 then out(1, string.format("kiln.full(%s, 0)", shape_lua(shape)), shape, "f32") return end
  -- the 0/1 placement of the counted entries, scaled by their weights for IDF and TFIDF
  local rows, refs = {}, {}
  for _, part in ipairs(parts) do
    refs[#refs + 1] = part.ref
    for k = 1, part.p do
      local e = part.from + k
      for c = 0, width - 1 do
        rows[#rows + 1] = num(c == place[e] and (mode == "TF" and 1 or (weights and weights[e] or 1)) or 0, "f32")
      end
    end
  end
  local cnt = #refs == 1 and refs[1] or string.format("kiln.concat({%s}, -1)", table.concat(refs, ", "))
  if mode == "IDF" then cnt = string.format("kiln.cast(kiln.gt(%s, 0), \"f32\")", cnt) end
  out(1, string.format("kiln.matmul(%s, kiln.constant({%s}, {%d, %d}))", cnt, table.concat(rows, ", "), #rows // width, width),
    shape, "f32")
end)
