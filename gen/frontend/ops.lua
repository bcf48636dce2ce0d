-- ops.lua — PyTorch functions that are compositions of Kiln's primitive ops, written in
-- Lua on top of them: clamp and the activations built from it, log_softmax, logsumexp,
-- var/std, tril/triu, flip, repeat, split, select, cumsum.
--
-- Because each is a composition, it runs on every target (C, Metal, Core ML) and in the
-- interpreter with no new kernel, and the fusion pass turns an elementwise composition
-- into one kernel. Each follows PyTorch's definition and its order of operations, so the
-- rounding is PyTorch's (hardswish is x * relu6(x + 3) / 6, not x * (x / 6 + 0.5)), and
-- NaN propagates as in PyTorch (clamp keeps a NaN: it compares, it does not take
-- fmax/fmin, which would drop it).
--
-- Errors are raised with level 0; the tracer names the user's line.
local kiln, methods = ...

local function fail(fmt, ...) error(string.format(fmt, ...), 0) end

local function is_tensor(v) return type(v) == "userdata" and getmetatable(v) and getmetatable(v).__name == "kiln.Tensor" end

local function check_tensor(v, who)
  if not is_tensor(v) then fail("%s: argument 1 must be a tensor, got %s", who, type(v)) end
  return v
end

-- dim in [-rank, rank) as 0-based.
local function dim_of(x, dim, who)
  local r = x.rank
  local d = math.tointeger(dim)
  if d == nil then fail("%s: dim must be an integer, got %s", who, tostring(dim)) end
  if d < -r or d >= r then fail("%s: dim %d is out of range for rank %d", who, d, r) end
  return d < 0 and d + r or d
end

-- Registers f as kiln.<name> and, when it takes the tensor first, as a tensor method.
local function def(name, f, method)
  kiln[name] = f
  if method ~= false then methods[name] = f end
end

-- ---- clamp and the activations made of it ----

-- clamp(x, min, max): either bound may be nil; numbers or tensors. x where it lies inside,
-- else the bound; a NaN stays NaN (torch.clamp).
local function clamp(x, lo, hi)
  check_tensor(x, "clamp")
  if lo == nil and hi == nil then fail("clamp: at least one of min and max must be given") end
  local y = x
  if lo ~= nil then y = kiln.where(y:lt(lo), lo, y) end
  if hi ~= nil then y = kiln.where(y:gt(hi), hi, y) end
  return y
end
def("clamp", clamp)
def("clip", clamp)
def("relu6", function(x) return clamp(check_tensor(x, "relu6"), 0, 6) end)
def("hardtanh", function(x, lo, hi) return clamp(check_tensor(x, "hardtanh"), lo or -1, hi or 1) end)
def("hardsigmoid", function(x) return clamp(check_tensor(x, "hardsigmoid") + 3, 0, 6) / 6 end)
def("hardswish", function(x) return check_tensor(x, "hardswish") * clamp(x + 3, 0, 6) / 6 end)
def("leaky_relu", function(x, slope)
  check_tensor(x, "leaky_relu")
  return kiln.where(x:gt(0), x, x * (slope or 0.01))
end)
def("elu", function(x, alpha)
  check_tensor(x, "elu")
  return kiln.where(x:gt(0), x, (kiln.exp(x) - 1) * (alpha or 1))
end)
-- softplus(x, beta, threshold): log(1 + exp(beta x)) / beta, and x itself where beta x
-- passes threshold (torch's linear region).
local function softplus(x, beta, threshold)
  check_tensor(x, "softplus")
  beta, threshold = beta or 1, threshold or 20
  local bx = beta == 1 and x or x * beta
  local soft = kiln.log(kiln.exp(bx) + 1)
  if beta ~= 1 then soft = soft / beta end
  return kiln.where(bx:gt(threshold), x, soft)
end
def("softplus", softplus)
def("mish", function(x) return check_tensor(x, "mish") * kiln.tanh(softplus(x)) end)
def("reciprocal", function(x) return 1 / check_tensor(x, "reciprocal") end)
-- sign: 1 above 0, -1 below, else 0 (NaN too, as torch.sign gives).
def("sign", function(x)
  check_tensor(x, "sign")
  return kiln.where(x:gt(0), 1, kiln.where(x:lt(0), -1, 0))
end)

-- ---- reductions ----

-- logsumexp(x, dim [, keepdim]): max + log(sum(exp(x - max))); the max is taken out so
-- exp cannot overflow (torch does the same).
def("logsumexp", function(x, dim, keepdim)
  check_tensor(x, "logsumexp")
  local d = dim_of(x, dim, "logsumexp")
  local m = kiln.amax(x, d, true)
  local y = kiln.log(kiln.sum(kiln.exp(x - m), d, true)) + m
  if keepdim then return y end
  return y:squeeze(d)
end)
-- log_softmax(x, dim): x - max - log(sum(exp(x - max))).
def("log_softmax", function(x, dim)
  check_tensor(x, "log_softmax")
  local d = dim_of(x, dim, "log_softmax")
  local shifted = x - kiln.amax(x, d, true)
  return shifted - kiln.log(kiln.sum(kiln.exp(shifted), d, true))
end)
-- var/std(x, dim [, {unbiased = true, keepdim = false}]): the mean of squared deviations
-- from the mean, divided by n - 1 (unbiased, torch's default) or n.
local function var(x, dim, opts, who)
  check_tensor(x, who)
  opts = opts or {}
  local d = dim_of(x, dim, who)
  local n = x.shape[d + 1]
  local unbiased = opts.unbiased ~= false
  if unbiased and n < 2 then fail("%s: an unbiased estimate needs at least 2 elements along dim %d", who, d) end
  local dev = x - kiln.mean(x, d, true)
  local v = kiln.sum(dev * dev, d, opts.keepdim or false) / (unbiased and n - 1 or n)
  return v
end
def("var", function(x, dim, opts) return var(x, dim, opts, "var") end)
def("std", function(x, dim, opts) return kiln.sqrt(var(x, dim, opts, "std")) end)

-- cumsum(x, dim): each output the sum of the elements up to it along dim, as a product
-- with an upper-triangular matrix of ones (exact in the number of terms; the order of the
-- additions is the matmul's, so it rounds like any sum of that length).
def("cumsum", function(x, dim)
  check_tensor(x, "cumsum")
  local d = dim_of(x, dim, "cumsum")
  local n = x.shape[d + 1]
  local tri = {}
  for i = 0, n - 1 do
    for j = 0, n - 1 do tri[#tri + 1] = i <= j and 1 or 0 end
  end
  local last = x.rank - 1
  local moved = d == last and x or x:transpose(d, last)
  local y = kiln.matmul(moved, kiln.constant(tri, {n, n}))
  return d == last and y or y:transpose(d, last)
end)

-- ---- shapes and indexing ----

-- tril/triu(x [, diagonal]): x where column - row <= diagonal (tril) or >= (triu), else 0,
-- over the last two dims.
local function tri(x, diagonal, lower, who)
  check_tensor(x, who)
  if x.rank < 2 then fail("%s: needs at least 2 dims, got rank %d", who, x.rank) end
  local k = math.tointeger(diagonal or 0)
  if k == nil then fail("%s: diagonal must be an integer", who) end
  local r, c = x.shape[x.rank - 1], x.shape[x.rank]
  local keep = {}
  for i = 0, r - 1 do
    for j = 0, c - 1 do keep[#keep + 1] = (lower and j - i <= k) or (not lower and j - i >= k) end
  end
  -- The zero in x's dtype: where() wants branches of one dtype (i32 and bool tensors too).
  local zero = x.dtype == "f32" and 0 or kiln.constant(0, nil, x.dtype)
  return kiln.where(kiln.constant(keep, {r, c}, "bool"), x, zero)
end
def("tril", function(x, diagonal) return tri(x, diagonal, true, "tril") end)
def("triu", function(x, diagonal) return tri(x, diagonal, false, "triu") end)

-- flip(x, dims): reverses x along each dim listed (a gather with descending indices).
def("flip", function(x, dims)
  check_tensor(x, "flip")
  if type(dims) ~= "table" then dims = {dims} end
  local y = x
  for _, dim in ipairs(dims) do
    local d = dim_of(x, dim, "flip")
    local n = x.shape[d + 1]
    local idx = {}
    for i = 1, n do idx[i] = n - i end
    y = kiln.gather(y, kiln.constant(idx, {n}, "i32"), d)
  end
  return y
end)

-- repeat_(x, {r1, r2, ...}) (torch's Tensor.repeat): tiles x r_i times along dim i;
-- extra leading repeats add dims. Named repeat_ because repeat is a Lua keyword; x:tile too.
local function tile(x, reps)
  check_tensor(x, "repeat")
  if type(reps) ~= "table" or #reps < x.rank then fail("repeat: give one count per dim (at least %d)", x.rank) end
  local y = x
  for _ = 1, #reps - x.rank do y = y:unsqueeze(0) end
  for i, r in ipairs(reps) do
    local n = math.tointeger(r)
    if n == nil or n < 1 then fail("repeat: counts must be integers >= 1, got %s", tostring(r)) end
    if n > 1 then
      local parts = {}
      for k = 1, n do parts[k] = y end
      y = kiln.concat(parts, i - 1)
    end
  end
  return y
end
def("repeat_", tile)
def("tile", tile)

-- split(x, sizes, dim): the pieces of x along dim, of the given sizes (summing to the
-- dim), or of size `sizes` each (the last may be smaller), as torch.split.
def("split", function(x, sizes, dim)
  check_tensor(x, "split")
  local d = dim_of(x, dim or 0, "split")
  local n = x.shape[d + 1]
  local list = {}
  if type(sizes) == "table" then
    local total = 0
    for i, s in ipairs(sizes) do
      local k = math.tointeger(s)
      if k == nil or k < 1 then fail("split: sizes must be integers >= 1, got %s", tostring(s)) end
      list[i] = k
      total = total + k
    end
    if total ~= n then fail("split: sizes sum to %d, dim %d has %d", total, d, n) end
  else
    local k = math.tointeger(sizes)
    if k == nil or k < 1 then fail("split: size must be an integer >= 1, got %s", tostring(sizes)) end
    for start = 0, n - 1, k do list[#list + 1] = math.min(k, n - start) end
  end
  local out, at = {}, 0
  for i, k in ipairs(list) do
    out[i] = x:slice(d, at, at + k)
    at = at + k
  end
  return table.unpack(out)
end)

-- select(x, dim, index): x at that index along dim, the dim removed; a negative index
-- counts from the end (torch.select).
def("select", function(x, dim, index)
  check_tensor(x, "select")
  local d = dim_of(x, dim, "select")
  local n = x.shape[d + 1]
  local i = math.tointeger(index)
  if i == nil or i < -n or i >= n then fail("select: index %s is out of range for size %d", tostring(index), n) end
  if i < 0 then i = i + n end
  return x:slice(d, i, i + 1):squeeze(d)
end)

-- ---- constants and broadcasting ----

local function shape_arg(shape, who)
  if type(shape) ~= "table" then fail("%s: shape must be an array of sizes, got %s", who, type(shape)) end
  return shape
end
-- full(shape, value [, dtype]), zeros(shape), ones(shape): constant tensors.
def("full", function(shape, value, dtype) return kiln.constant(value, shape_arg(shape, "full"), dtype) end, false)
def("zeros", function(shape, dtype) return kiln.constant(0, shape_arg(shape, "zeros"), dtype) end, false)
def("ones", function(shape, dtype) return kiln.constant(1, shape_arg(shape, "ones"), dtype) end, false)

-- expand(x, shape) / broadcast_to: x repeated along its size-1 dims (and new leading
-- dims) to shape, numpy rules; -1 keeps a dim. A where() with a small all-true mask
-- whose only non-1 dims are the expanded ones does it without storing shape's bytes.
local function expand(x, shape)
  check_tensor(x, "expand")
  shape_arg(shape, "expand")
  local r, lead = #shape, #shape - x.rank
  if lead < 0 then fail("expand: shape has %d dims, x has %d", r, x.rank) end
  local mask = {}
  for i = 1, r do
    local want, have = shape[i], i > lead and x.shape[i - lead] or 1
    if want == -1 then want = have end
    if have ~= 1 and have ~= want then fail("expand: dim %d of size %d cannot become %d", i - 1, have, want) end
    mask[i] = have == want and 1 or want
  end
  return kiln.where(kiln.constant(true, mask), x, x)   -- x twice: any dtype (bool, i32 too)
end
def("expand", expand)
def("broadcast_to", expand)

-- ---- indexing ----

-- take_along_dim(x, idx, dim) (torch.gather): out[..i..] = x[..idx[..i..]..] along dim,
-- per element; idx has x's rank and i32 dtype, and its other dims broadcast with x's
-- (each expanded first, where needed), then one gather_elements. An index out of range
-- is an error in `kiln run`; kernels clamp it, as gather's.
def("take_along_dim", function(x, idx, dim)
  check_tensor(x, "take_along_dim")
  if not is_tensor(idx) or idx.dtype ~= "i32" then fail("take_along_dim: the index must be an i32 tensor") end
  if idx.rank ~= x.rank then fail("take_along_dim: the index has rank %d, x rank %d", idx.rank, x.rank) end
  local d = dim_of(x, dim, "take_along_dim")
  local xs, is, xb, ib = {}, {}, false, false
  for i = 1, x.rank do
    local a, b = x.shape[i], idx.shape[i]
    if i ~= d + 1 and a ~= b then
      if a ~= 1 and b ~= 1 then fail("take_along_dim: dim %d differs: x %d, index %d", i - 1, a, b) end
      xb, ib = xb or a == 1, ib or b == 1
    end
    xs[i] = i == d + 1 and a or math.max(a, b)
    is[i] = i == d + 1 and b or math.max(a, b)
  end
  if xb then x = x:expand(xs) end
  if ib then idx = idx:expand(is) end
  return kiln.gather_elements(x, idx, d)
end)

-- gather in torch's argument order, gather(x, dim, index), is torch.gather: per element,
-- index of x's rank, its other dims at most x's (x is sliced to them, as torch reads
-- only that corner). Kiln's own order, gather(x, index, dim), stays index_select (an
-- embedding lookup), so a per-element index is never silently read as index_select's:
-- the number in second place tells them apart. index_select(x, dim, index) is torch's.
local index_select = kiln.gather
def("gather", function(x, a, b)
  if math.type(a) ~= "integer" then return index_select(x, a, b) end
  check_tensor(x, "gather")
  if not is_tensor(b) or b.dtype ~= "i32" then fail("gather: the index (argument 3) must be an i32 tensor") end
  if b.rank ~= x.rank then fail("gather: the index has rank %d, x rank %d (torch.gather)", b.rank, x.rank) end
  local d = dim_of(x, a, "gather")
  for i = 1, x.rank do
    if i ~= d + 1 and b.shape[i] ~= x.shape[i] then
      if b.shape[i] > x.shape[i] then
        fail("gather: index dim %d is %d, larger than x's %d (torch.gather)", i - 1, b.shape[i], x.shape[i])
      end
      x = x:slice(i - 1, 0, b.shape[i])
    end
  end
  return kiln.gather_elements(x, b, d)
end)
def("index_select", function(x, dim, index) return index_select(x, index, dim) end)

-- scatter(x, dim, index, src) (torch.scatter, reduce none): x with out[..index[..i..]..] =
-- src[..i..] along dim. src may be a number (torch's value form) or a tensor at least as
-- large as index in every dim (torch uses its leading part). The last of duplicate
-- targets wins (torch leaves it open); index's other dims must equal x's.
local raw_scatter = kiln.scatter
local function scatter(x, dim, index, src)
  check_tensor(x, "scatter")
  if not is_tensor(index) or index.dtype ~= "i32" then fail("scatter: the index must be an i32 tensor") end
  if type(src) == "number" then
    src = kiln.full(index.shape, src, x.dtype)
  elseif is_tensor(src) and src.rank == index.rank then
    for i = 1, src.rank do
      if src.shape[i] < index.shape[i] then fail("scatter: src dim %d is %d, smaller than index's %d", i - 1, src.shape[i], index.shape[i]) end
      if src.shape[i] > index.shape[i] then src = src:slice(i - 1, 0, index.shape[i]) end
    end
  end
  return raw_scatter(x, dim, index, src)
end
def("scatter", scatter)

-- index_put(x, {index}, values) (torch's index_put, accumulate false) with one i32 index
-- vector: rows index[j] of x (dim 0) become values[j]; values broadcast to [#index,
-- x.shape[2..]]. An index_copy along dim 0.
def("index_put", function(x, indices, values)
  check_tensor(x, "index_put")
  if type(indices) ~= "table" or is_tensor(indices) or #indices ~= 1 or not is_tensor(indices[1]) then
    fail("index_put: indices must be a list of one i32 index tensor (one indexed dim)")
  end
  local idx = indices[1]
  if idx.dtype ~= "i32" or idx.rank ~= 1 then fail("index_put: the index must be an i32 vector") end
  local shape = x.shape
  shape[1] = idx.shape[1]
  if type(values) == "number" then values = kiln.full(shape, values, x.dtype)
  else
    check_tensor(values, "index_put")
    local same = values.rank == #shape
    for i = 1, #shape do same = same and values.shape[i] == shape[i] end
    if not same then values = values:expand(shape) end
  end
  return kiln.index_copy(x, 0, idx, values)
end)

-- ---- padding ----

-- pad(x, pads [, mode = "constant" [, value = 0]]) as torch.nn.functional.pad: pads lists
-- (before, after) pairs starting from the last dim; mode "constant", "reflect" (the edge
-- not repeated) or "replicate" (the edge repeated).
def("pad", function(x, pads, mode, value)
  check_tensor(x, "pad")
  if type(pads) ~= "table" or #pads % 2 ~= 0 or #pads // 2 > x.rank then
    fail("pad: pads must hold (before, after) pairs for at most %d dims", x.rank)
  end
  mode = mode or "constant"
  if mode ~= "constant" and mode ~= "reflect" and mode ~= "replicate" then
    fail("pad: mode must be \"constant\", \"reflect\" or \"replicate\", got %s", tostring(mode))
  end
  local y = x
  for k = 1, #pads // 2 do
    local d = x.rank - k
    local before, after = math.tointeger(pads[2 * k - 1]), math.tointeger(pads[2 * k])
    if before == nil or after == nil or before < 0 or after < 0 then fail("pad: sizes must be integers >= 0") end
    local n = y.shape[d + 1]
    if mode == "reflect" and (before >= n or after >= n) then
      fail("pad: reflect padding %d, %d must be smaller than dim %d's size %d", before, after, d, n)
    end
    local function edge(count, at_start)
      if count == 0 then return nil end
      if mode == "constant" then
        local s = y.shape
        s[d + 1] = count
        return kiln.full(s, value or 0)
      end
      local idx = {}
      for i = 1, count do
        if mode == "replicate" then idx[i] = at_start and 0 or n - 1
        elseif at_start then idx[i] = count - i + 1
        else idx[i] = n - 2 - (i - 1) end
      end
      return kiln.gather(y, kiln.constant(idx, {count}, "i32"), d)
    end
    local parts = {}
    local b, a = edge(before, true), edge(after, false)
    if b then parts[#parts + 1] = b end
    parts[#parts + 1] = y
    if a then parts[#parts + 1] = a end
    if #parts > 1 then y = kiln.concat(parts, d) end
  end
  return y
end)

-- ---- resampling ----

-- The [out, n] matrix of linear interpolation weights along one dim, as
-- torch.nn.functional.interpolate computes the source coordinate: align_corners maps the
-- corners onto each other, else pixel centres (scale n/out; a negative coordinate clamps
-- to 0).
local function linear_weights(n, out, align_corners)
  local w = {}
  for i = 0, out - 1 do
    local src
    if align_corners then src = out > 1 and i * (n - 1) / (out - 1) or 0
    else src = math.max((i + 0.5) * n / out - 0.5, 0) end
    local i0 = math.min(math.floor(src), n - 1)
    local i1 = math.min(i0 + 1, n - 1)
    local f = src - i0
    for j = 0, n - 1 do
      local v = 0
      if j == i0 then v = v + (1 - f) end
      if j == i1 then v = v + f end
      w[#w + 1] = v
    end
  end
  return kiln.constant(w, {out, n})
end

-- The [out, n] averaging matrix of adaptive average pooling: output i averages inputs
-- floor(i n / out) .. ceil((i + 1) n / out) - 1, as torch does.
local function adaptive_weights(n, out)
  local w = {}
  for i = 0, out - 1 do
    local s, e = (i * n) // out, -((-(i + 1) * n) // out)
    for j = 0, n - 1 do w[#w + 1] = (j >= s and j < e) and 1 / (e - s) or 0 end
  end
  return kiln.constant(w, {out, n})
end

-- Applies [out, n] matrices along the last two dims of x [N, C, H, W].
local function resample2d(x, mh, mw)
  local y = kiln.matmul(mh, x)                          -- [N, C, Ho, W]
  return kiln.matmul(y, mw, {trans_b = true})           -- [N, C, Ho, Wo]
end

local function out_size(x, opts, who)
  local h, w = x.shape[3], x.shape[4]
  if opts.size then
    local s = type(opts.size) == "table" and opts.size or {opts.size, opts.size}
    return s[1], s[2]
  end
  local f = opts.scale_factor
  if f == nil then fail("%s: give size or scale_factor", who) end
  local fh, fw = type(f) == "table" and f[1] or f, type(f) == "table" and f[2] or f
  return math.floor(h * fh), math.floor(w * fw)
end

-- interpolate(x, {size = {h, w} | scale_factor = s, mode = "nearest" | "bilinear",
-- align_corners = false}) on x [N, C, H, W]. nearest takes input floor(i in / out)
-- (a gather per dim); bilinear multiplies by interpolation matrices along H and W.
def("interpolate", function(x, opts)
  check_tensor(x, "interpolate")
  if x.rank ~= 4 then fail("interpolate: expects x [N, C, H, W], got rank %d", x.rank) end
  opts = opts or {}
  local mode = opts.mode or "nearest"
  local ho, wo = out_size(x, opts, "interpolate")
  local h, w = x.shape[3], x.shape[4]
  if mode == "nearest" then
    local function pick(n, out)
      local idx = {}
      for i = 0, out - 1 do idx[i + 1] = math.min((i * n) // out, n - 1) end
      return kiln.constant(idx, {out}, "i32")
    end
    return kiln.gather(kiln.gather(x, pick(h, ho), 2), pick(w, wo), 3)
  elseif mode == "bilinear" then
    local ac = opts.align_corners == true
    return resample2d(x, linear_weights(h, ho, ac), linear_weights(w, wo, ac))
  end
  fail("interpolate: mode must be \"nearest\" or \"bilinear\", got %s", tostring(mode))
end)

-- adaptive_avg_pool2d(x, size) on x [N, C, H, W]: averages over torch's adaptive windows.
def("adaptive_avg_pool2d", function(x, size)
  check_tensor(x, "adaptive_avg_pool2d")
  if x.rank ~= 4 then fail("adaptive_avg_pool2d: expects x [N, C, H, W], got rank %d", x.rank) end
  local s = type(size) == "table" and size or {size, size}
  return resample2d(x, adaptive_weights(x.shape[3], s[1]), adaptive_weights(x.shape[4], s[2]))
end)

-- ---- convolution and normalisation ----

-- A 1-d option as its one value: v itself, the first of a table, or default when nil.
local function one(v, default)
  if v == nil then return default end
  if type(v) == "table" then return v[1] end
  return v
end

-- conv1d(x [N, C, L], w [O, C/g, K] [, bias] [, {stride, padding, dilation, groups}]): a
-- conv2d over a height of 1.
def("conv1d", function(x, w, bias, opts)
  check_tensor(x, "conv1d")
  if x.rank ~= 3 then fail("conv1d: expects x [N, C, L], got rank %d", x.rank) end
  if not is_tensor(w) or w.rank ~= 3 then fail("conv1d: expects w [O, C/groups, K]") end
  if type(bias) == "table" and not is_tensor(bias) then bias, opts = nil, bias end
  opts = opts or {}
  local pad = opts.padding
  if type(pad) ~= "string" then pad = {0, one(pad, 0)} end
  local y = kiln.conv2d(x:unsqueeze(2), w:unsqueeze(2), bias,
                        {stride = {1, one(opts.stride, 1)}, padding = pad, dilation = {1, one(opts.dilation, 1)},
                         groups = opts.groups})
  return y:squeeze(2)
end)

-- conv_transpose1d(x [N, C, L], w [C, O/g, K] [, bias] [, {stride, padding,
-- output_padding, dilation, groups}]): a conv_transpose2d over a height of 1.
def("conv_transpose1d", function(x, w, bias, opts)
  check_tensor(x, "conv_transpose1d")
  if x.rank ~= 3 then fail("conv_transpose1d: expects x [N, C, L], got rank %d", x.rank) end
  if not is_tensor(w) or w.rank ~= 3 then fail("conv_transpose1d: expects w [C, O/groups, K]") end
  if type(bias) == "table" and not is_tensor(bias) then bias, opts = nil, bias end
  opts = opts or {}
  local y = kiln.conv_transpose2d(x:unsqueeze(2), w:unsqueeze(2), bias,
                                  {stride = {1, one(opts.stride, 1)}, padding = {0, one(opts.padding, 0)},
                                   output_padding = {0, one(opts.output_padding, 0)},
                                   dilation = {1, one(opts.dilation, 1)}, groups = opts.groups})
  return y:squeeze(2)
end)

-- group_norm(x, groups, weight, bias [, eps = 1e-5]) on x [N, C, ...]: each group of C /
-- groups channels normalised over its channels and positions (biased variance), then
-- the per-channel affine.
def("group_norm", function(x, groups, weight, bias, eps)
  check_tensor(x, "group_norm")
  if x.rank < 2 then fail("group_norm: expects x [N, C, ...], got rank %d", x.rank) end
  local n, c = x.shape[1], x.shape[2]
  local g = math.tointeger(groups)
  if g == nil or g < 1 or c % g ~= 0 then fail("group_norm: groups %s must divide the %d channels", tostring(groups), c) end
  local grouped = x:reshape(n, g, -1)
  local mean = kiln.mean(grouped, 2, true)
  local dev = grouped - mean
  local var = kiln.mean(dev * dev, 2, true)
  local y = (dev / kiln.sqrt(var + (eps or 1e-5))):reshape(table.unpack(x.shape))
  local per = {c}
  for _ = 3, x.rank do per[#per + 1] = 1 end
  if weight then y = y * weight:reshape(table.unpack(per)) end
  if bias then y = y + bias:reshape(table.unpack(per)) end
  return y
end)

-- instance_norm(x [, weight, bias [, eps]]): F.instance_norm at inference without running
-- statistics: each (sample, channel) normalised over its positions, a group_norm with
-- one channel per group.
def("instance_norm", function(x, weight, bias, eps)
  check_tensor(x, "instance_norm")
  if x.rank < 3 then fail("instance_norm: x must be [N, C, ...], got rank %d", x.rank) end
  return kiln.group_norm(x, x.shape[2], weight, bias, eps)
end)

-- ---- logical ----

-- v as a bool tensor, as torch's logical ops read their operands: nonzero is true. A Lua
-- boolean or number is a constant.
local function truth(v, who)
  if type(v) == "boolean" then return kiln.constant(v) end
  if type(v) == "number" then return kiln.constant(v ~= 0) end
  if not is_tensor(v) then fail("%s: operands must be tensors, booleans or numbers, got %s", who, type(v)) end
  if v.dtype == "bool" then return v end
  return v:ne(0)
end

-- logical_not(x), logical_and/or/xor(a, b): torch's, any dtypes, bool results,
-- broadcasting; selects between bools, so every target runs them without a kernel of
-- their own.
local function logical_not(x)
  return kiln.where(truth(x, "logical_not"), kiln.constant(false), kiln.constant(true))
end
def("logical_not", logical_not)
def("logical_and", function(a, b) return kiln.where(truth(a, "logical_and"), truth(b, "logical_and"), kiln.constant(false)) end)
def("logical_or", function(a, b) return kiln.where(truth(a, "logical_or"), kiln.constant(true), truth(b, "logical_or")) end)
def("logical_xor", function(a, b)
  local y = truth(b, "logical_xor")
  return kiln.where(truth(a, "logical_xor"), logical_not(y), y)
end)

-- ---- einsum ----

-- einsum(spec, a [, b, ...]) as torch.einsum, for explicit specs ("bij,bjk->bik") or
-- implicit ones ("ij,jk": the output is the indices seen once, sorted): every operand is
-- permuted and unsqueezed onto one index order (output indices first, then the summed
-- ones), multiplied with broadcasting, and summed over the indices not in the output.
-- Repeated indices within one operand (diagonals) and "..." are not supported.
def("einsum", function(spec, ...)
  if type(spec) ~= "string" then fail("einsum: the first argument must be the subscript string") end
  local ops = {...}
  local clean = spec:gsub("%s", "")
  local arrow = clean:find("->", 1, true)
  local has_arrow = arrow ~= nil
  local lhs, rhs = clean, ""
  if arrow then lhs, rhs = clean:sub(1, arrow - 1), clean:sub(arrow + 2) end
  local inputs = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do inputs[#inputs + 1] = term end
  if #inputs ~= #ops then fail("einsum: %s names %d operands, %d given", spec, #inputs, #ops) end
  local count, size = {}, {}
  for k, term in ipairs(inputs) do
    local x = check_tensor(ops[k], "einsum")
    if term:find("%.") then fail("einsum: '...' is not supported") end
    if #term ~= x.rank then fail("einsum: operand %d has rank %d, %q names %d dims", k, x.rank, term, #term) end
    local seen = {}
    for i = 1, #term do
      local c = term:sub(i, i)
      if not c:match("%a") then fail("einsum: subscripts are letters, got %q", c) end
      if seen[c] then fail("einsum: index %s repeats within operand %d (diagonals are not supported)", c, k) end
      seen[c] = true
      local n = x.shape[i]
      if size[c] and size[c] ~= n and size[c] ~= 1 and n ~= 1 then
        fail("einsum: index %s is %d in one operand and %d in another", c, size[c], n)
      end
      size[c] = math.max(size[c] or 1, n)
      count[c] = (count[c] or 0) + 1
    end
  end
  if not has_arrow then                        -- implicit output: indices seen once, sorted
    local once = {}
    for c, n in pairs(count) do if n == 1 then once[#once + 1] = c end end
    table.sort(once)
    rhs = table.concat(once)
  end
  local order = {}
  for i = 1, #rhs do
    local c = rhs:sub(i, i)
    if not size[c] then fail("einsum: output index %s appears in no operand", c) end
    order[#order + 1] = c
  end
  local summed = {}
  for c in pairs(size) do if not rhs:find(c, 1, true) then summed[#summed + 1] = c end end
  table.sort(summed)
  for _, c in ipairs(summed) do order[#order + 1] = c end
  local product
  for k, term in ipairs(inputs) do
    local x, dims = ops[k], {}
    for i = 1, #term do dims[term:sub(i, i)] = i - 1 end
    local perm, present = {}, {}
    for _, c in ipairs(order) do
      if dims[c] then perm[#perm + 1] = dims[c]; present[#present + 1] = c end
    end
    if #perm > 1 then x = x:permute(table.unpack(perm)) end
    local at = 0                               -- insert size-1 dims for the absent indices
    for i, c in ipairs(order) do
      if present[at + 1] == c then at = at + 1 else x = x:unsqueeze(i - 1) end
    end
    product = product and product * x or x
  end
  if #summed > 0 then
    local axes = {}
    for i = #rhs, #order - 1 do axes[#axes + 1] = i end
    product = kiln.sum(product, axes)
  end
  return product
end, false)
