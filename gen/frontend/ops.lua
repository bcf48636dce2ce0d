-- ops.lua — PyTorch functions that are compositions of Kiln's primitive ops, written in
-- Lua on top of them: clamp and the activations built from it, log_softmax, logsumexp,
-- var/std, min reductions, tril/triu, flip, repeat, split, select, cumsum.
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
-- amin(x, dim [, keepdim]) = -amax(-x).
def("amin", function(x, dim, keepdim)
  check_tensor(x, "amin")
  return -kiln.amax(-x, dim, keepdim)
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
  return kiln.where(kiln.constant(keep, {r, c}, "bool"), x, 0)
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
