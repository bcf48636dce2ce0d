-- nn.lua — `kiln.nn`: neural-network modules written in Lua on top of kiln's ops.
--
-- Modules are tables whose metatable is their class; calling an instance runs
-- its forward inside an nn scope (kiln._scope), so every node created meanwhile
-- is named after the module's path ("layers.0.attn"). Paths are PyTorch
-- state_dict prefixes, fixed when a module is first called: a module's children
-- are the module-valued fields (and arrays of modules) of its table, named by key
-- (array entries from 0), enumerated in sorted order so that names never depend
-- on Lua's hash order. Parameters are created on first use (Module:param), named
-- path .. "." .. name, so a safetensors file exported from the equivalent
-- torch.nn module loads without renaming; their default initialisers copy the
-- shape of PyTorch's (kaiming-uniform bound 1/sqrt(fan_in), ones/zeros for norms,
-- N(0, 1) for embeddings) on Kiln's deterministic generator.
--
-- Errors are raised with level 0 (no position): the tracer's message handler
-- names the line of the user's script that led here, never a line of this file.
local kiln = ...

local nn = {}
local defining_builtins = true   -- nn.Module classes made while this file loads are built-ins

local function fail(fmt, ...) error(string.format(fmt, ...), 0) end

-- An integer >= min (default 1); integral floats are accepted.
local function check_int(v, what, min)
  min = min or 1
  local i = math.tointeger(v)
  if i == nil then fail("%s must be an integer, got %s", what, tostring(v)) end
  if i < min then fail("%s must be >= %d, got %d", what, min, i) end
  return i
end

-- The options table (or {}) after refusing keys not in known.
local function check_opts(opts, who, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail("%s: options must be a table, got %s", who, type(opts)) end
  local bad = {}
  for k in pairs(opts) do
    if not known[k] then bad[#bad + 1] = tostring(k) end
  end
  table.sort(bad)
  if bad[1] then fail("%s: unknown option '%s'", who, bad[1]) end
  return opts
end

-- {h, w} from a number or a 2-array.
local function pair(v, what)
  if type(v) == "table" then
    if #v ~= 2 then fail("%s must be a number or {h, w}", what) end
    return {check_int(v[1], what), check_int(v[2], what)}
  end
  local i = check_int(v, what)
  return {i, i}
end

local function join(path, name)
  if path == "" then return name end
  return path .. "." .. name
end

-- ---- classes and instances ----

local Module = {}      -- methods every module has
local active = {}      -- modules whose forward is running, outermost first

local function is_module(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "_is_class") == true
end

-- Sorted list of {name, mod} children of m (see the file comment).
local function children(m)
  local list = {}
  for k, v in pairs(m) do
    local named = (type(k) == "string" and k:sub(1, 1) ~= "_") or math.type(k) == "integer"
    if named then
      local kname = math.type(k) == "integer" and tostring(k - 1) or k
      if is_module(v) then
        list[#list + 1] = {key = k, i = 0, name = kname, mod = v}
      elseif type(v) == "table" and getmetatable(v) == nil then
        for i, c in ipairs(v) do
          if is_module(c) then list[#list + 1] = {key = k, i = i, name = kname .. "." .. (i - 1), mod = c} end
        end
      end
    end
  end
  table.sort(list, function(a, b)
    if a.key ~= b.key then
      local ia, ib = math.type(a.key) == "integer", math.type(b.key) == "integer"
      if ia ~= ib then return ia end
      return a.key < b.key
    end
    return a.i < b.i
  end)
  return list
end

-- Gives m and every unnamed module below it its path.
local function assign_paths(m, path)
  if rawget(m, "_path") ~= nil then return end
  rawset(m, "_path", path)
  for _, c in ipairs(children(m)) do assign_paths(c.mod, join(path, c.name)) end
end

-- Names a module called for the first time: as a child of a running module if
-- one holds it (created lazily in a forward), else as a root (nn.name prefix or "").
local function name_on_first_call(m)
  for d = #active, 1, -1 do
    local parent = active[d]
    for _, c in ipairs(children(parent)) do
      if rawequal(c.mod, m) then
        assign_paths(m, join(parent._path, c.name))
        return
      end
    end
  end
  assign_paths(m, rawget(m, "_prefix") or "")
end

local ActiveGuard = {__close = function(g)
  for d = #active, g.depth, -1 do active[d] = nil end
end}

-- Calling an instance: name it if needed, enter its scope, run forward.
local function module_call(self, ...)
  if rawget(self, "_path") == nil then name_on_first_call(self) end
  local cls = getmetatable(self)
  local scope <close> = kiln._scope(self._path, cls._builtin and cls._name or nil, rawget(self, "_made_chunk"),
                                    rawget(self, "_made_line"))
  local depth = #active + 1
  active[depth] = self
  local guard <close> = setmetatable({depth = depth}, ActiveGuard)
  return self:forward(...)
end

local function module_tostring(self)
  local path = rawget(self, "_path")
  return "nn." .. getmetatable(self)._name .. (path and path ~= "" and (" '" .. path .. "'") or "")
end

local function construct(cls, ...)
  local self = setmetatable({_params = {}}, cls)
  if cls._builtin then self._made_chunk, self._made_line = kiln._where() end   -- the user's line of this layer
  self:init(...)
  return self
end

-- nn.Module(name) -> a class; define cls:init(...) and cls:forward(...), then
-- cls(...) makes an instance.
function nn.Module(name)
  if type(name) ~= "string" then fail("nn.Module: the class needs a name, got %s", type(name)) end
  local cls = {_is_class = true, _name = name, __call = module_call, __tostring = module_tostring,
               _builtin = defining_builtins}
  -- A field the instance lacks: the class's (methods), else a parameter the module has
  -- created (`self.wte.weight` once wte was called: weight tying, as torch's attributes).
  cls.__index = function(self, k)
    local v = cls[k]
    if v ~= nil then return v end
    local ps = rawget(self, "_params")
    return ps and ps[k]
  end
  return setmetatable(cls, {__index = Module, __call = construct})
end

function Module:init() end

function Module:forward()
  fail("nn.%s has no forward method", getmetatable(self)._name)
end

-- self:param(name, shape [, init]) -> the parameter path .. "." .. name, created on first use.
function Module:param(name, shape, init)
  local p = self._params[name]
  if p then return p end
  local tied = rawget(self, name)   -- a tensor assigned to the field: torch's `head.weight = wte.weight`
  if type(tied) == "userdata" and getmetatable(tied) and getmetatable(tied).__name == "kiln.Tensor" then
    for i = 1, math.max(#shape, tied.rank) do
      if tied.shape[i] ~= shape[i] then
        fail("nn.%s: the tensor assigned to %s has shape [%s], the module needs [%s]", getmetatable(self)._name, name,
             table.concat(tied.shape, ", "), table.concat(shape, ", "))
      end
    end
    self._params[name] = tied
    return tied
  end
  local path = rawget(self, "_path")
  if path == nil then fail("nn.%s: parameters are created when the module is called", getmetatable(self)._name) end
  p = kiln.param(join(path, name), shape, init)
  self._params[name] = p
  return p
end

-- nn.name(m, prefix) -> m: a root module's path prefix (call before its first use).
function nn.name(m, prefix)
  if not is_module(m) then fail("nn.name: argument 1 must be a module, got %s", type(m)) end
  if type(prefix) ~= "string" then fail("nn.name: the prefix must be a string, got %s", type(prefix)) end
  local path = rawget(m, "_path")
  if path ~= nil then fail("nn.name: the module was already called as '%s'; name it before its first call", path) end
  rawset(m, "_prefix", prefix)
  return m
end

nn.is_module = is_module

-- kaiming_uniform(a = sqrt(5)) as torch.nn.Linear/Conv2d use: bound 1/sqrt(fan_in).
local function fan_in_uniform(fan_in)
  local bound = 1 / math.sqrt(fan_in)
  return {"uniform", -bound, bound}
end

-- ---- layers with parameters ----

local Linear = nn.Module("Linear")
nn.Linear = Linear

function Linear:init(in_features, out_features, opts)
  self.in_features = check_int(in_features, "nn.Linear: in_features")
  self.out_features = check_int(out_features, "nn.Linear: out_features")
  opts = check_opts(opts, "nn.Linear", {bias = true})
  self.has_bias = opts.bias ~= false
end

function Linear:forward(x)
  local init = fan_in_uniform(self.in_features)
  local w = self:param("weight", {self.out_features, self.in_features}, init)
  local b = nil
  if self.has_bias then b = self:param("bias", {self.out_features}, rawget(self, "_bias_init") or init) end
  return kiln.linear(x, w, b)
end

local Conv2d = nn.Module("Conv2d")
nn.Conv2d = Conv2d

function Conv2d:init(cin, cout, kernel, opts)
  self.in_channels = check_int(cin, "nn.Conv2d: in_channels")
  self.out_channels = check_int(cout, "nn.Conv2d: out_channels")
  self.kernel_size = pair(kernel, "nn.Conv2d: kernel_size")
  opts = check_opts(opts, "nn.Conv2d", {stride = true, padding = true, dilation = true, groups = true, bias = true})
  self.groups = check_int(opts.groups or 1, "nn.Conv2d: groups")
  if cin % self.groups ~= 0 or cout % self.groups ~= 0 then
    fail("nn.Conv2d: groups %d must divide in_channels %d and out_channels %d", self.groups, cin, cout)
  end
  self.has_bias = opts.bias ~= false
  self.conv = {stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = self.groups}
end

function Conv2d:forward(x)
  local kh, kw = self.kernel_size[1], self.kernel_size[2]
  local cin_g = self.in_channels // self.groups
  local init = fan_in_uniform(cin_g * kh * kw)
  local w = self:param("weight", {self.out_channels, cin_g, kh, kw}, init)
  local b = nil
  if self.has_bias then b = self:param("bias", {self.out_channels}, init) end
  return kiln.conv2d(x, w, b, self.conv)
end

-- Conv1d(cin, cout, kernel [, {stride, padding, dilation, groups, bias}]): kiln.conv1d with
-- torch's weight [cout, cin/groups, kernel].
local Conv1d = nn.Module("Conv1d")
nn.Conv1d = Conv1d

function Conv1d:init(cin, cout, kernel, opts)
  self.in_channels = check_int(cin, "nn.Conv1d: in_channels")
  self.out_channels = check_int(cout, "nn.Conv1d: out_channels")
  self.kernel_size = check_int(type(kernel) == "table" and kernel[1] or kernel, "nn.Conv1d: kernel_size")
  opts = check_opts(opts, "nn.Conv1d", {stride = true, padding = true, dilation = true, groups = true, bias = true})
  self.groups = check_int(opts.groups or 1, "nn.Conv1d: groups")
  if cin % self.groups ~= 0 or cout % self.groups ~= 0 then
    fail("nn.Conv1d: groups %d must divide in_channels %d and out_channels %d", self.groups, cin, cout)
  end
  self.has_bias = opts.bias ~= false
  self.conv = {stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = self.groups}
end

function Conv1d:forward(x)
  local cin_g = self.in_channels // self.groups
  local init = fan_in_uniform(cin_g * self.kernel_size)
  local w = self:param("weight", {self.out_channels, cin_g, self.kernel_size}, init)
  local b = nil
  if self.has_bias then b = self:param("bias", {self.out_channels}, init) end
  return kiln.conv1d(x, w, b, self.conv)
end

-- ConvTranspose2d / ConvTranspose1d(cin, cout, kernel [, {stride, padding, output_padding,
-- dilation, groups, bias}]): kiln.conv_transpose2d/1d with torch's weight [cin, cout/groups,
-- kh, kw] ([cin, cout/groups, k]); torch's default init reads fan_in from the weight's dim
-- 1, so the bound is 1/sqrt(cout/groups * kernel elements).
local function conv_t_init(self, name, cin, cout, opts)
  self.in_channels = check_int(cin, name .. ": in_channels")
  self.out_channels = check_int(cout, name .. ": out_channels")
  opts = check_opts(opts, name, {stride = true, padding = true, output_padding = true, dilation = true, groups = true,
                                 bias = true})
  self.groups = check_int(opts.groups or 1, name .. ": groups")
  if cin % self.groups ~= 0 or cout % self.groups ~= 0 then
    fail("%s: groups %d must divide in_channels %d and out_channels %d", name, self.groups, cin, cout)
  end
  self.has_bias = opts.bias ~= false
  self.conv = {stride = opts.stride, padding = opts.padding, output_padding = opts.output_padding,
               dilation = opts.dilation, groups = self.groups}
end

local ConvTranspose2d = nn.Module("ConvTranspose2d")
nn.ConvTranspose2d = ConvTranspose2d

function ConvTranspose2d:init(cin, cout, kernel, opts)
  self.kernel_size = pair(kernel, "nn.ConvTranspose2d: kernel_size")
  conv_t_init(self, "nn.ConvTranspose2d", cin, cout, opts)
end

function ConvTranspose2d:forward(x)
  local kh, kw = self.kernel_size[1], self.kernel_size[2]
  local cout_g = self.out_channels // self.groups
  local init = fan_in_uniform(cout_g * kh * kw)
  local w = self:param("weight", {self.in_channels, cout_g, kh, kw}, init)
  local b = nil
  if self.has_bias then b = self:param("bias", {self.out_channels}, init) end
  return kiln.conv_transpose2d(x, w, b, self.conv)
end

local ConvTranspose1d = nn.Module("ConvTranspose1d")
nn.ConvTranspose1d = ConvTranspose1d

function ConvTranspose1d:init(cin, cout, kernel, opts)
  self.kernel_size = check_int(type(kernel) == "table" and kernel[1] or kernel, "nn.ConvTranspose1d: kernel_size")
  conv_t_init(self, "nn.ConvTranspose1d", cin, cout, opts)
end

function ConvTranspose1d:forward(x)
  local cout_g = self.out_channels // self.groups
  local init = fan_in_uniform(cout_g * self.kernel_size)
  local w = self:param("weight", {self.in_channels, cout_g, self.kernel_size}, init)
  local b = nil
  if self.has_bias then b = self:param("bias", {self.out_channels}, init) end
  return kiln.conv_transpose1d(x, w, b, self.conv)
end

-- GroupNorm(groups, channels [, {eps = 1e-5, affine = true}])
local GroupNorm = nn.Module("GroupNorm")
nn.GroupNorm = GroupNorm

function GroupNorm:init(groups, c, opts)
  self.num_groups = check_int(groups, "nn.GroupNorm: num_groups")
  self.num_channels = check_int(c, "nn.GroupNorm: num_channels")
  if c % groups ~= 0 then fail("nn.GroupNorm: num_groups %d must divide num_channels %d", groups, c) end
  opts = check_opts(opts, "nn.GroupNorm", {eps = true, affine = true})
  self.eps = opts.eps or 1e-5
  self.affine = opts.affine ~= false
end

function GroupNorm:forward(x)
  local w, b = nil, nil
  if self.affine then
    w = self:param("weight", {self.num_channels}, {"ones"})
    b = self:param("bias", {self.num_channels}, {"zeros"})
  end
  return kiln.group_norm(x, self.num_groups, w, b, self.eps)
end

-- BatchNorm2d / BatchNorm1d(c [, {eps, momentum}]): inference with the running
-- statistics; 2d takes x [N, C, H, W], 1d x [N, C] or [N, C, L].
local function batchnorm_class(name, ranks, shape_doc)
  local cls = nn.Module(name)
  nn[name] = cls
  function cls:init(c, opts)
    self.num_features = check_int(c, "nn." .. name .. ": num_features")
    opts = check_opts(opts, "nn." .. name, {eps = true, momentum = true})
    self.eps = opts.eps or 1e-5
  end
  function cls:forward(x)
    if not ranks[x.rank] then fail("nn.%s: expects x %s, got rank %d", name, shape_doc, x.rank) end
    local c = self.num_features
    local w = self:param("weight", {c}, {"ones"})
    local b = self:param("bias", {c}, {"zeros"})
    local mean = self:param("running_mean", {c}, {"zeros"})
    local var = self:param("running_var", {c}, {"ones"})
    return kiln.batchnorm(x, mean, var, w, b, {eps = self.eps})
  end
  return cls
end
batchnorm_class("BatchNorm2d", {[4] = true}, "[N, C, H, W]")
batchnorm_class("BatchNorm1d", {[2] = true, [3] = true}, "[N, C] or [N, C, L]")

-- normalized_shape: a number or an array.
local function norm_shape(d, who)
  if type(d) == "table" then
    local s = {}
    for i, v in ipairs(d) do s[i] = check_int(v, who .. ": normalized_shape") end
    if #s == 0 then fail("%s: normalized_shape is empty", who) end
    return s
  end
  return {check_int(d, who .. ": normalized_shape")}
end

-- x's last #shape dims must be shape (checked here when there is no gamma to check it).
local function check_tail(x, shape, who)
  local xs = x.shape
  local ok = #xs >= #shape
  for i = 1, #shape do ok = ok and xs[#xs - #shape + i] == shape[i] end
  if not ok then
    fail("%s: input [%s] does not end in normalized_shape [%s]", who, table.concat(xs, ", "), table.concat(shape, ", "))
  end
end

local LayerNorm = nn.Module("LayerNorm")
nn.LayerNorm = LayerNorm

function LayerNorm:init(d, opts)
  self.normalized_shape = norm_shape(d, "nn.LayerNorm")
  opts = check_opts(opts, "nn.LayerNorm", {eps = true, elementwise_affine = true, bias = true})
  self.eps = opts.eps or 1e-5
  self.affine = opts.elementwise_affine ~= false
  self.has_bias = self.affine and opts.bias ~= false
end

function LayerNorm:forward(x)
  local s = self.normalized_shape
  check_tail(x, s, "nn.LayerNorm")
  local w, b = nil, nil
  if self.affine then w = self:param("weight", s, {"ones"}) end
  if self.has_bias then b = self:param("bias", s, {"zeros"}) end
  return kiln.layernorm(x, w, b, {eps = self.eps, dims = #s})
end

local RMSNorm = nn.Module("RMSNorm")
nn.RMSNorm = RMSNorm

function RMSNorm:init(d, opts)
  self.normalized_shape = norm_shape(d, "nn.RMSNorm")
  opts = check_opts(opts, "nn.RMSNorm", {eps = true, elementwise_affine = true})
  self.eps = opts.eps or 1e-5
  self.affine = opts.elementwise_affine ~= false
end

function RMSNorm:forward(x)
  local s = self.normalized_shape
  check_tail(x, s, "nn.RMSNorm")
  local w = nil
  if self.affine then w = self:param("weight", s, {"ones"}) end
  return kiln.rmsnorm(x, w, {eps = self.eps, dims = #s})
end

local Embedding = nn.Module("Embedding")
nn.Embedding = Embedding

function Embedding:init(n, d)
  self.num_embeddings = check_int(n, "nn.Embedding: num_embeddings")
  self.embedding_dim = check_int(d, "nn.Embedding: embedding_dim")
end

function Embedding:forward(ids)
  local w = self:param("weight", {self.num_embeddings, self.embedding_dim}, {"normal", 0, 1})
  return kiln.embedding(w, ids)
end

-- ---- attention ----

local MultiHeadAttention = nn.Module("MultiHeadAttention")
nn.MultiHeadAttention = MultiHeadAttention
nn.MultiheadAttention = MultiHeadAttention   -- PyTorch's spelling

function MultiHeadAttention:init(d, heads, opts)
  self.embed_dim = check_int(d, "nn.MultiHeadAttention: embed_dim")
  self.num_heads = check_int(heads, "nn.MultiHeadAttention: num_heads")
  if d % heads ~= 0 then fail("nn.MultiHeadAttention: embed_dim %d is not divisible by num_heads %d", d, heads) end
  self.head_dim = d // heads
  opts = check_opts(opts, "nn.MultiHeadAttention", {bias = true, batch_first = true, dropout = true})
  if opts.batch_first == false then fail("nn.MultiHeadAttention: only batch_first = true is supported") end
  self.has_bias = opts.bias ~= false
  self.out_proj = nn.Linear(d, d, {bias = self.has_bias})
  rawset(self.out_proj, "_bias_init", {"zeros"})   -- as MultiheadAttention._reset_parameters
end

-- Applies an attention mask (bool: true = may not attend, as torch.nn.MultiheadAttention;
-- float: added) to scores [B, h, L, S].
local function apply_mask(scores, mask)
  if mask.dtype == "bool" then return kiln.where(mask, -math.huge, scores) end
  return scores + mask
end

-- mha(query [, key [, value [, attn_mask [, key_padding_mask]]]]) -> output [B, L, d]
-- (or [L, d] for unbatched [L, d] inputs). attn_mask: [L, S] or [B*heads, L, S];
-- key_padding_mask: [B, S]. Dropout is the identity; attention weights are not returned.
function MultiHeadAttention:forward(query, key, value, attn_mask, key_padding_mask)
  key = key or query
  value = value or key
  local d, h, hd = self.embed_dim, self.num_heads, self.head_dim
  local xb = math.sqrt(6 / (d + 3 * d))                     -- xavier_uniform_ of [3d, d]
  local w = self:param("in_proj_weight", {3 * d, d}, {"uniform", -xb, xb})
  local b = nil
  if self.has_bias then b = self:param("in_proj_bias", {3 * d}, {"zeros"}) end
  local unbatched = query.rank == 2
  if unbatched then
    query, key, value = query:unsqueeze(0), key:unsqueeze(0), value:unsqueeze(0)
    if key_padding_mask then key_padding_mask = key_padding_mask:unsqueeze(0) end
  end
  for _, t in ipairs({query, key, value}) do
    if t.rank ~= 3 or t:size(-1) ~= d then
      fail("nn.MultiHeadAttention: inputs must be [B, L, %d] (batch_first), got [%s]", d, table.concat(t.shape, ", "))
    end
  end
  local n, l, s = query:size(0), query:size(1), key:size(1)
  local q, k, v
  if query.id == key.id and key.id == value.id then          -- self-attention: one packed projection
    q, k, v = kiln.linear(query, w, b):chunk(3, -1)
  else
    local wq, wk, wv = w:chunk(3, 0)
    local bq, bk, bv = nil, nil, nil
    if b then bq, bk, bv = b:chunk(3, 0) end
    q, k, v = kiln.linear(query, wq, bq), kiln.linear(key, wk, bk), kiln.linear(value, wv, bv)
  end
  q = q:reshape(n, l, h, hd):transpose(1, 2)                 -- [B, h, L, hd]
  k = k:reshape(n, s, h, hd):transpose(1, 2)
  v = v:reshape(n, s, h, hd):transpose(1, 2)
  q = q / math.sqrt(hd)
  local scores = kiln.matmul(q, k, {trans_b = true})          -- [B, h, L, S]
  if attn_mask then
    if attn_mask.rank == 3 then attn_mask = attn_mask:reshape(n, h, l, s) end
    scores = apply_mask(scores, attn_mask)
  end
  if key_padding_mask then scores = apply_mask(scores, key_padding_mask:reshape(n, 1, 1, s)) end
  local out = kiln.matmul(kiln.softmax(scores, -1), v)       -- [B, h, L, hd]
  out = self.out_proj(out:transpose(1, 2):reshape(n, l, d))
  if unbatched then out = out:reshape(l, d) end
  return out
end

local activations = {
  relu = kiln.relu,
  gelu = kiln.gelu,
  gelu_tanh = function(x) return kiln.gelu(x, "tanh") end,
  silu = kiln.silu,
  tanh = kiln.tanh,
  sigmoid = kiln.sigmoid,
}

local TransformerEncoderLayer = nn.Module("TransformerEncoderLayer")
nn.TransformerEncoderLayer = TransformerEncoderLayer

-- (d_model, nhead [, dim_feedforward = 2048 [, opts]]) as torch.nn.TransformerEncoderLayer
-- with batch_first = true; activation "relu" (default, as PyTorch), "gelu", "gelu_tanh",
-- "silu", or a function.
function TransformerEncoderLayer:init(d, heads, ff, opts)
  self.d_model = check_int(d, "nn.TransformerEncoderLayer: d_model")
  self.dim_feedforward = check_int(ff or 2048, "nn.TransformerEncoderLayer: dim_feedforward")
  opts = check_opts(opts, "nn.TransformerEncoderLayer", {activation = true, norm_first = true, eps = true,
    layer_norm_eps = true, bias = true, batch_first = true, dropout = true})
  if opts.batch_first == false then fail("nn.TransformerEncoderLayer: only batch_first = true is supported") end
  local act = opts.activation or "relu"
  if type(act) == "string" then
    if not activations[act] then fail("nn.TransformerEncoderLayer: unknown activation '%s' (relu, gelu, gelu_tanh, silu)", act) end
    self.activation_name = act
  elseif type(act) ~= "function" and not is_module(act) then
    fail("nn.TransformerEncoderLayer: activation must be a name or a function, got %s", type(act))
  end
  self._activation = type(act) == "string" and activations[act] or act
  self.norm_first = opts.norm_first == true
  local eps = opts.layer_norm_eps or opts.eps or 1e-5
  local bias = opts.bias ~= false
  self.self_attn = nn.MultiHeadAttention(d, heads, {bias = bias})
  self.linear1 = nn.Linear(d, self.dim_feedforward, {bias = bias})
  self.linear2 = nn.Linear(self.dim_feedforward, d, {bias = bias})
  self.norm1 = nn.LayerNorm(d, {eps = eps, bias = bias})
  self.norm2 = nn.LayerNorm(d, {eps = eps, bias = bias})
end

-- layer(x [, attn_mask [, key_padding_mask]]) -> [B, L, d]
function TransformerEncoderLayer:forward(x, mask, key_padding_mask)
  local function sa(y) return self.self_attn(y, y, y, mask, key_padding_mask) end
  local function ff(y) return self.linear2(self._activation(self.linear1(y))) end
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + ff(self.norm2(x))
  else
    x = self.norm1(x + sa(x))
    x = self.norm2(x + ff(x))
  end
  return x
end

local TransformerDecoderLayer = nn.Module("TransformerDecoderLayer")
nn.TransformerDecoderLayer = TransformerDecoderLayer

-- (d_model, nhead [, dim_feedforward = 2048 [, opts]]) as torch.nn.TransformerDecoderLayer
-- with batch_first = true: self-attention over the target, attention to the memory
-- (multihead_attn), the feed-forward; post-norm, or pre-norm with norm_first. Options as
-- the encoder layer's.
function TransformerDecoderLayer:init(d, heads, ff, opts)
  TransformerEncoderLayer.init(self, d, heads, ff, opts)
  local bias = opts == nil or opts.bias ~= false
  local eps = opts and (opts.layer_norm_eps or opts.eps) or 1e-5
  self.multihead_attn = nn.MultiHeadAttention(d, heads, {bias = bias})
  self.norm3 = nn.LayerNorm(d, {eps = eps, bias = bias})
end

-- layer(tgt, memory [, tgt_mask [, memory_mask [, tgt_key_padding_mask [, memory_key_padding_mask]]]])
function TransformerDecoderLayer:forward(x, memory, tgt_mask, memory_mask, tgt_pad, memory_pad)
  local function sa(y) return self.self_attn(y, y, y, tgt_mask, tgt_pad) end
  local function ca(y) return self.multihead_attn(y, memory, memory, memory_mask, memory_pad) end
  local function ff(y) return self.linear2(self._activation(self.linear1(y))) end
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + ca(self.norm2(x))
    x = x + ff(self.norm3(x))
  else
    x = self.norm1(x + sa(x))
    x = self.norm2(x + ca(x))
    x = self.norm3(x + ff(x))
  end
  return x
end

-- ---- layers without parameters ----

-- A parameter-free module class calling f(x, self).
local function simple(name, f, init)
  local cls = nn.Module(name)
  if init then cls.init = init end
  function cls:forward(x) return f(x, self) end
  nn[name] = cls
  return cls
end

simple("ReLU", function(x) return kiln.relu(x) end)
simple("SiLU", function(x) return kiln.silu(x) end)
simple("Tanh", function(x) return kiln.tanh(x) end)
simple("Sigmoid", function(x) return kiln.sigmoid(x) end)
simple("Identity", function(x) return x end)
simple("Dropout", function(x) return x end)   -- inference: the identity
simple("GELU", function(x, self) return kiln.gelu(x, self.approximate) end, function(self, approx)
  if type(approx) == "table" then approx = check_opts(approx, "nn.GELU", {approximate = true}).approximate end
  approx = approx or "none"
  if approx ~= "none" and approx ~= "tanh" then fail("nn.GELU: approximate must be \"none\" or \"tanh\", got %s", tostring(approx)) end
  self.approximate = approx
end)
simple("Flatten", function(x, self) return kiln.flatten(x, self.start_dim, self.end_dim) end, function(self, s, e)
  self.start_dim = check_int(s or 1, "nn.Flatten: start_dim", -64)
  self.end_dim = check_int(e or -1, "nn.Flatten: end_dim", -64)
end)
simple("Softmax", function(x, self) return kiln.softmax(x, self.dim) end, function(self, dim)
  self.dim = check_int(dim or -1, "nn.Softmax: dim", -64)
end)

-- The activations gen/frontend/ops.lua composes, as modules with torch.nn's arguments.
local function number_or(v, default, what)
  if v == nil then return default end
  if type(v) ~= "number" then fail("%s must be a number, got %s", what, type(v)) end
  return v
end
simple("ReLU6", function(x) return kiln.relu6(x) end)
simple("Hardswish", function(x) return kiln.hardswish(x) end)
simple("Hardsigmoid", function(x) return kiln.hardsigmoid(x) end)
simple("Mish", function(x) return kiln.mish(x) end)
simple("Hardtanh", function(x, self) return kiln.hardtanh(x, self.min_val, self.max_val) end, function(self, lo, hi)
  self.min_val = number_or(lo, -1, "nn.Hardtanh: min_val")
  self.max_val = number_or(hi, 1, "nn.Hardtanh: max_val")
end)
simple("LeakyReLU", function(x, self) return kiln.leaky_relu(x, self.negative_slope) end, function(self, slope)
  self.negative_slope = number_or(slope, 0.01, "nn.LeakyReLU: negative_slope")
end)
simple("ELU", function(x, self) return kiln.elu(x, self.alpha) end, function(self, alpha)
  self.alpha = number_or(alpha, 1, "nn.ELU: alpha")
end)
simple("Softplus", function(x, self) return kiln.softplus(x, self.beta, self.threshold) end, function(self, beta, threshold)
  self.beta = number_or(beta, 1, "nn.Softplus: beta")
  self.threshold = number_or(threshold, 20, "nn.Softplus: threshold")
end)
simple("LogSoftmax", function(x, self) return kiln.log_softmax(x, self.dim) end, function(self, dim)
  self.dim = check_int(dim or -1, "nn.LogSoftmax: dim", -64)
end)

-- Upsample({size = .. | scale_factor = .., mode = "nearest" | "bilinear", align_corners})
simple("Upsample", function(x, self) return kiln.interpolate(x, self.opts) end, function(self, opts)
  self.opts = check_opts(opts, "nn.Upsample", {size = true, scale_factor = true, mode = true, align_corners = true})
end)

-- AdaptiveAvgPool2d(size)
simple("AdaptiveAvgPool2d", function(x, self) return kiln.adaptive_avg_pool2d(x, self.output_size) end,
  function(self, size) self.output_size = size end)

-- MaxPool2d(kernel [, {stride, padding}]) / AvgPool2d(kernel [, {stride, padding, count_include_pad}])
local function pool(name, op, known)
  simple(name, function(x, self) return op(x, self.opts) end, function(self, kernel, opts)
    opts = check_opts(opts, "nn." .. name, known)
    self.kernel_size = pair(kernel, "nn." .. name .. ": kernel_size")
    self.opts = {kernel = self.kernel_size, stride = opts.stride, padding = opts.padding,
                 count_include_pad = opts.count_include_pad}
  end)
end
pool("MaxPool2d", kiln.maxpool2d, {stride = true, padding = true})
pool("AvgPool2d", kiln.avgpool2d, {stride = true, padding = true, count_include_pad = true})

-- ---- recurrent layers ----

-- LSTM / GRU(input_size, hidden_size [, {num_layers = 1, bias = true, batch_first = false,
-- bidirectional = false}]) as torch.nn's, unrolled over the sequence: the input
-- projections of all steps are one matmul per layer and direction, then each step adds
-- the hidden projection and applies the gates (LSTM i, f, g, o; GRU r, z, n, in torch's
-- order and formulas). forward(x [, h0 [, c0]]) -> output, h_n (, c_n for LSTM); x is
-- [T, B, in] ([B, T, in] with batch_first, or unbatched [T, in]). Parameters are torch's:
-- weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0 (and _reverse), initialised
-- U(-1/sqrt(hidden), 1/sqrt(hidden)).
local function recurrent(name, ngates)
  local cls = nn.Module(name)
  nn[name] = cls
  function cls:init(input_size, hidden_size, opts)
    self.input_size = check_int(input_size, "nn." .. name .. ": input_size")
    self.hidden_size = check_int(hidden_size, "nn." .. name .. ": hidden_size")
    opts = check_opts(opts, "nn." .. name, {num_layers = true, bias = true, batch_first = true, bidirectional = true,
                                            dropout = true})
    self.num_layers = check_int(opts.num_layers or 1, "nn." .. name .. ": num_layers")
    self.has_bias = opts.bias ~= false
    self.batch_first = opts.batch_first == true
    self.directions = opts.bidirectional and 2 or 1
  end

  -- One direction of one layer over the steps xs[1..T] ([B, in] each): the outputs [B, H]
  -- in step order, and the last hidden (and cell) state.
  function cls:run(xs, layer, suffix, h, c)
    local hs, g = self.hidden_size, ngates * self.hidden_size
    local in_size = layer == 0 and self.input_size or self.hidden_size * self.directions
    local bound = 1 / math.sqrt(hs)
    local init = {"uniform", -bound, bound}
    local tag = "_l" .. layer .. suffix
    local w_ih = self:param("weight_ih" .. tag, {g, in_size}, init)
    local w_hh = self:param("weight_hh" .. tag, {g, hs}, init)
    local b_ih, b_hh = nil, nil
    if self.has_bias then
      b_ih = self:param("bias_ih" .. tag, {g}, init)
      b_hh = self:param("bias_hh" .. tag, {g}, init)
    end
    local steps = #xs
    local xw = kiln.linear(kiln.stack(xs, 0), w_ih, b_ih)            -- [T, B, g]: every step's input part
    local out = {}
    for t = 1, steps do
      local xt = xw:select(0, t - 1)
      local hw = kiln.linear(h, w_hh, b_hh)
      if ngates == 4 then
        local i, f, gg, o = (xt + hw):chunk(4, -1)
        c = kiln.sigmoid(f) * c + kiln.sigmoid(i) * kiln.tanh(gg)
        h = kiln.sigmoid(o) * kiln.tanh(c)
      else
        local xr, xz, xn = xt:chunk(3, -1)
        local hr, hz, hn = hw:chunk(3, -1)
        local r, z = kiln.sigmoid(xr + hr), kiln.sigmoid(xz + hz)
        local n = kiln.tanh(xn + r * hn)
        h = (1 - z) * n + z * h
      end
      out[t] = h
    end
    return out, h, c
  end

  function cls:forward(x, h0, c0)
    local unbatched = x.rank == 2
    if unbatched then x = x:unsqueeze(1) elseif self.batch_first then x = x:transpose(0, 1) end
    if x.rank ~= 3 or x:size(2) ~= self.input_size then
      fail("nn.%s: expects x [T, B, %d] (batch_first: [B, T, %d]; unbatched [T, %d])", name, self.input_size,
           self.input_size, self.input_size)
    end
    local steps, batch, hs = x:size(0), x:size(1), self.hidden_size
    local function initial(v, k)
      if v == nil then return kiln.zeros({batch, hs}) end
      if unbatched then v = v:unsqueeze(1) end
      return v:select(0, k)
    end
    local xs = {}
    for t = 1, steps do xs[t] = x:select(0, t - 1) end
    local hn, cn = {}, {}
    for layer = 0, self.num_layers - 1 do
      local outs = {}
      for d = 0, self.directions - 1 do
        local k = layer * self.directions + d
        local seq = xs
        if d == 1 then seq = {} for t = 1, steps do seq[t] = xs[steps + 1 - t] end end
        local o, h, c = self:run(seq, layer, d == 1 and "_reverse" or "", initial(h0, k), initial(c0, k))
        if d == 1 then local r = {} for t = 1, steps do r[t] = o[steps + 1 - t] end o = r end
        outs[d + 1] = o
        hn[#hn + 1], cn[#cn + 1] = h, c
      end
      for t = 1, steps do
        xs[t] = self.directions == 1 and outs[1][t] or kiln.concat({outs[1][t], outs[2][t]}, -1)
      end
    end
    local output = kiln.stack(xs, 0)                                  -- [T, B, H * directions]
    local h_n = kiln.stack(hn, 0)
    local c_n = ngates == 4 and kiln.stack(cn, 0) or nil
    if unbatched then
      output, h_n = output:squeeze(1), h_n:squeeze(1)
      if c_n then c_n = c_n:squeeze(1) end
    elseif self.batch_first then
      output = output:transpose(0, 1)
    end
    if ngates == 4 then return output, h_n, c_n end
    return output, h_n
  end
  return cls
end
recurrent("LSTM", 4)
recurrent("GRU", 3)

-- ---- containers ----

-- The modules of a container's arguments: one array, or the modules themselves.
local function module_list(who, ...)
  local list = ...
  if select("#", ...) ~= 1 or is_module(list) then list = {...} end
  if type(list) ~= "table" then fail("%s: expects an array of modules, got %s", who, type(list)) end
  for i, m in ipairs(list) do
    if not is_module(m) and not (who == "nn.Sequential" and type(m) == "function") then
      fail("%s: entry %d is a %s, not a module", who, i, type(m))
    end
  end
  return list
end

local Sequential = nn.Module("Sequential")
nn.Sequential = Sequential

-- nn.Sequential{m1, m2, ...}: children named "0", "1", ... (seq[1] is child "0"). An entry
-- may be a plain function of the tensor (kiln.relu, function(x) return x * 2 end): it has
-- no parameters and takes no name, but keeps its place in the numbering, as a
-- parameter-free torch module would.
function Sequential:init(...)
  for i, m in ipairs(module_list("nn.Sequential", ...)) do self[i] = m end
end

function Sequential:forward(x, ...)
  for i = 1, #self do
    if i == 1 then x = self[i](x, ...) else x = self[i](x) end
  end
  return x
end

local ModuleList = nn.Module("ModuleList")
nn.ModuleList = ModuleList

-- nn.ModuleList{...}: children "0", "1", ...; iterate with ipairs, extend with :append(m).
function ModuleList:init(...)
  if select("#", ...) == 0 then return end
  for i, m in ipairs(module_list("nn.ModuleList", ...)) do self[i] = m end
end

function ModuleList:append(m)
  if not is_module(m) then fail("nn.ModuleList:append: argument must be a module, got %s", type(m)) end
  self[#self + 1] = m
  return self
end

function ModuleList:forward()
  fail("nn.ModuleList is not callable: iterate over it (for _, m in ipairs(list) do x = m(x) end)")
end

defining_builtins = false   -- classes made from here on are the user's (their forward is their own code)

return setmetatable(nn, {__index = function(_, k)
  fail("unknown nn module '%s'", tostring(k))
end})
