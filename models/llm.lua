-- llm.lua — decoder-only language models from a Hugging Face checkpoint directory, with a
-- key/value cache: entry `prefill` runs a chunk of tokens, entry `decode` one.
--
--   kiln build models/llm.lua -o out -D checkpoint=DIR [-D max_context=N] [-D prefill=T]
--                                [-D prefill_logits=last]
--
-- DIR holds config.json and the weights as published: model.safetensors, or shards listed
-- by model.safetensors.index.json. model_type (config.json) picks the family:
--   llama   Llama 2 and 3.x: RMSNorm, rotary embeddings (rope_theta; rope_scaling
--           "llama3" or none), grouped-query attention, SwiGLU MLP, tied or untied head;
--           attention_bias / mlp_bias honoured
--   qwen2   Llama with a bias on q, k and v
--   qwen3   Llama with RMSNorm on every query and key head (q_norm, k_norm) before the
--           rotation, head_dim from the config
--   gemma3_text, and gemma3 (the multimodal checkpoint: its text_config, the tensors
--           under language_model.; the vision tower's are left unused)
--           Gemma 3: RMSNorm scaling by (1 + weight), norms before and after both the
--           attention and the MLP, q/k RMSNorm, GELU-tanh gated MLP, embeddings times
--           sqrt(hidden_size), attention scale query_pre_attn_scalar^-1/2, tied head,
--           final_logit_softcapping; layers alternate sliding-window attention
--           (sliding_window keys, RoPE base rope_local_base_freq) and global attention
--           (rope_theta, rope_scaling "linear" or none), by layer_types or
--           sliding_window_pattern. Absent fields take Gemma3TextConfig's defaults
--           (published multimodal configs omit most of text_config).
-- A config field this script does not support (another rope_scaling type, another
-- hidden_act, sliding windows outside Gemma, attn_logit_softcapping) is an error naming
-- it; fields that do not change the computation (torch_dtype, bos_token_id, ...) are
-- ignored.
--
-- The rotation uses Hugging Face's layout: a head's two halves (x1, x2) turn as
-- (x1 cos - x2 sin, x2 cos + x1 sin), frequencies theta^(-2i/head_dim). The cos/sin tables
-- for max_context positions are computed here in double precision and stored as f32
-- constants (the generated code computes no trigonometry).
--
-- State: per layer the keys and values of every position so far, layers.<i>.k/.v,
-- f32 [kv heads, max_context, head_dim] (Gemma's sliding layers: a ring, below). Both entries take the position of their first
-- token `pos` (an i32 scalar) and return logits for every token they were given:
--   prefill  tokens i32 [prefill], pos -> logits f32 [prefill, vocab]
--   decode   token i32 [1], pos -> logits f32 [1, vocab]
-- With -D prefill_logits=last, prefill returns one row instead, the one text generation
-- samples from (runtime/llm/kiln_generate.c: the prompt's last token):
--   prefill  tokens i32 [prefill], pos, last i32 -> logits f32 [1, vocab] of row `last`
-- The classifier (vocab x hidden, often the largest product of a small model) then runs on
-- one row instead of prefill rows; `last` outside [0, prefill) reads the nearest row (every
-- target's gather clamps its indices).
-- A write past max_context makes the generated C return <M>_E_RANGE before touching
-- anything.
--
-- Gemma's sliding-window layers keep a ring instead: layers.<i>.k/.v of
-- min(sliding_window + prefill - 1, max_context) slots, position p in slot p mod that
-- size (kiln.write {ring = true}); sdpa {window = sliding_window} reads the positions
-- pos + i - window < p <= pos + i from their slots (docs/ops.md). The prefill - 1 extra
-- slots keep the window of a chunk's first row alive while the chunk is written, so a
-- decode costs O(window) on those layers whatever the context.
local kiln = require "kiln"
local nn = require "kiln.nn"

local dir = kiln.path("checkpoint", "weights/tiny-llm")   -- default: a seeded 2-layer Llama (models/weights/README.md)
local cfg_file = dir .. "/config.json"
local cfg = kiln.json(cfg_file)
local where = ""          -- "text_config." when the fields are read from a multimodal config's text part

local function unsupported(name, why) error(cfg_file .. ": " .. where .. name .. " " .. why .. " is not supported by llm.lua", 2) end

local FAMILY = cfg.model_type
if FAMILY == "gemma3" then
  if type(cfg.text_config) ~= "table" then error(cfg_file .. ": field text_config is missing (model_type gemma3)") end
  cfg, where = cfg.text_config, "text_config."
  FAMILY = "gemma3_text"
end
local GEMMA = FAMILY == "gemma3_text"
-- Gemma3TextConfig's defaults, for the fields a Gemma config may leave out.
local GEMMA_DEFAULTS = {vocab_size = 262208, hidden_size = 2304, intermediate_size = 9216, num_hidden_layers = 26,
                        num_attention_heads = 8, num_key_value_heads = 4, head_dim = 256, rms_norm_eps = 1e-6,
                        rope_theta = 1000000.0, rope_local_base_freq = 10000.0, query_pre_attn_scalar = 256,
                        sliding_window = 4096, max_position_embeddings = 131072, tie_word_embeddings = true,
                        hidden_activation = "gelu_pytorch_tanh"}

-- A config value: number/string/boolean as the file has it, or the default when the
-- field is absent or null (Gemma: Gemma3TextConfig's); a missing required field names itself.
local function field(name, default)
  local v = cfg[name]
  if v == nil or v == kiln.null then
    if GEMMA and GEMMA_DEFAULTS[name] ~= nil then default = GEMMA_DEFAULTS[name] end
    if default == nil then error(cfg_file .. ": field " .. where .. name .. " is missing", 2) end
    return default
  end
  return v
end

if FAMILY ~= "llama" and FAMILY ~= "qwen2" and FAMILY ~= "qwen3" and not GEMMA then
  unsupported("model_type", string.format("%q (llama, qwen2, qwen3, gemma3_text, gemma3)", field("model_type")))
end
local DIM = field("hidden_size")
local HIDDEN = field("intermediate_size")
local LAYERS = field("num_hidden_layers")
local HEADS = field("num_attention_heads")
local KV_HEADS = field("num_key_value_heads", HEADS)
local HD = field("head_dim", DIM // HEADS)
local VOCAB = field("vocab_size")
local EPS = field("rms_norm_eps")
local THETA = field("rope_theta", 10000.0)
local TIED = field("tie_word_embeddings", GEMMA)
local QKV_BIAS = FAMILY == "qwen2" or field("attention_bias", false)
local MLP_BIAS = field("mlp_bias", false)
local QK_NORM = FAMILY == "qwen3" or GEMMA
if HEADS % KV_HEADS ~= 0 then error(cfg_file .. ": " .. where .. "num_attention_heads is not a multiple of num_key_value_heads") end
if GEMMA then
  if field("hidden_activation") ~= "gelu_pytorch_tanh" then
    unsupported("hidden_activation", string.format("%q (gelu_pytorch_tanh)", cfg.hidden_activation))
  end
  if field("attn_logit_softcapping", false) then
    unsupported("attn_logit_softcapping", tostring(cfg.attn_logit_softcapping) .. " (null: sdpa has no soft-capping)")
  end
  if field("use_bidirectional_attention", false) then unsupported("use_bidirectional_attention", "true") end
else
  if field("hidden_act", "silu") ~= "silu" then unsupported("hidden_act", string.format("%q (silu)", cfg.hidden_act)) end
  if field("use_sliding_window", false) then unsupported("use_sliding_window", "true") end
end

local CTX = kiln.option("max_context", math.min(field("max_position_embeddings", 2048), 2048))
local PREFILL = kiln.option("prefill", 32)
local PREFILL_LOGITS = kiln.option("prefill_logits", "all")
if PREFILL_LOGITS ~= "all" and PREFILL_LOGITS ~= "last" then
  error(string.format("-D prefill_logits=%s: want all or last", PREFILL_LOGITS), 0)
end

-- ---- Gemma's layer kinds: true for a sliding-window layer (layer_types, else every
-- sliding_window_pattern-th layer is global), and the ring size of those layers' caches.
local SLIDING, WINDOW, RING = {}, nil, nil
if GEMMA then
  local types = cfg.layer_types
  if types ~= nil and types ~= kiln.null then
    if type(types) ~= "table" or #types ~= LAYERS then unsupported("layer_types", "(not one entry per layer)") end
    for i, t in ipairs(types) do
      if t ~= "sliding_attention" and t ~= "full_attention" then
        unsupported("layer_types", string.format("entry %q (sliding_attention, full_attention)", tostring(t)))
      end
      SLIDING[i - 1] = t == "sliding_attention"
    end
  else
    local every = field("sliding_window_pattern", 6)
    if math.type(every) ~= "integer" or every < 1 then unsupported("sliding_window_pattern", tostring(every)) end
    for i = 0, LAYERS - 1 do SLIDING[i] = (i + 1) % every ~= 0 end
  end
  WINDOW = field("sliding_window")
  if math.type(WINDOW) ~= "integer" or WINDOW < 1 then unsupported("sliding_window", tostring(WINDOW)) end
  RING = math.min(WINDOW + PREFILL - 1, CTX)
end

-- ---- weights: one file, or the shards an index lists (each loaded once, in name order).
-- A multimodal Gemma file also holds the vision tower: loaded leniently, then every
-- tensor under language_model. must be one the text model uses (checked below).
local STRICT = where == ""
local loaded = {}
-- Loads one weights file of the checkpoint, noting which file holds each tensor name.
local function load(file)
  for _, name in ipairs(kiln.load(dir .. "/" .. file, {strict = STRICT})) do loaded[name] = file end
end
if kiln.exists(dir .. "/model.safetensors.index.json") then
  local index = kiln.json(dir .. "/model.safetensors.index.json")
  local shards, seen = {}, {}
  for _, file in pairs(index.weight_map) do
    if not seen[file] then seen[file] = true; shards[#shards + 1] = file end
  end
  table.sort(shards)
  for _, file in ipairs(shards) do load(file) end
else
  load("model.safetensors")
end

-- ---- rotary tables: inverse frequencies (with Llama 3's scaling, or Gemma's linear
-- one), then cos/sin [CTX, HD]
-- Llama 3's rope_scaling, in place on the inverse frequencies f: long wavelengths slowed
-- by factor, short ones kept, a smooth blend between.
local function llama3_scaling(f, rs)
  local factor, lo, hi, old = rs.factor, rs.low_freq_factor, rs.high_freq_factor, rs.original_max_position_embeddings
  local lo_wavelen, hi_wavelen = old / lo, old / hi
  for i, freq in ipairs(f) do
    local wavelen = 2 * math.pi / freq
    if wavelen > lo_wavelen then
      f[i] = freq / factor
    elseif wavelen >= hi_wavelen then
      local smooth = (old / wavelen - lo) / (hi - lo)
      f[i] = (1 - smooth) * freq / factor + smooth * freq
    end
  end
end

-- theta^(-2i/HD), scaled as rs (a rope_scaling table, or nil) asks; `name` is the
-- config field rs came from, for errors.
local function inv_freqs(theta, rs, name)
  local f = {}
  for i = 0, HD // 2 - 1 do f[i + 1] = 1.0 / theta ^ (2 * i / HD) end
  if rs == nil or rs == kiln.null then return f end
  local kind = rs.rope_type or rs.type
  if kind == "llama3" and not GEMMA then
    llama3_scaling(f, rs)
  elseif (kind == "linear" or kind == "default") and GEMMA then
    local factor = kind == "linear" and rs.factor or 1
    if type(factor) ~= "number" or factor <= 0 then unsupported(name, "factor " .. tostring(rs.factor)) end
    for i = 1, #f do f[i] = f[i] / factor end
  else
    unsupported(name, string.format("type %q (%s, or none)", tostring(kind), GEMMA and "linear" or "llama3"))
  end
  return f
end

local function rope_tables(f)
  local cos, sin = {}, {}
  for p = 0, CTX - 1 do
    for half = 0, 1 do
      for i = 1, HD // 2 do
        cos[#cos + 1] = math.cos(p * f[i])
        sin[#sin + 1] = math.sin(p * f[i])
      end
    end
  end
  return {cos = kiln.constant(cos, {CTX, HD}), sin = kiln.constant(sin, {CTX, HD})}
end

-- The tables of each layer kind: `global` for every layer but Gemma's sliding ones
-- (`local`). Gemma's rope_parameters (newer configs), when present, give both kinds.
local ROPE = {}
local rp = GEMMA and cfg.rope_parameters
if rp and rp ~= kiln.null then
  for _, kk in ipairs({{"global", "full_attention"}, {"local", "sliding_attention"}}) do   -- a fixed order: stable output
    local kind, key = kk[1], kk[2]
    local p = rp[key]
    if type(p) ~= "table" then unsupported("rope_parameters", "without " .. key) end
    ROPE[kind] = rope_tables(inv_freqs(p.rope_theta or THETA, p, "rope_parameters." .. key))
  end
else
  ROPE.global = rope_tables(inv_freqs(THETA, cfg.rope_scaling, "rope_scaling"))
  if GEMMA then ROPE["local"] = rope_tables(inv_freqs(field("rope_local_base_freq"), nil, "rope_local_base_freq")) end
end

-- Rows pos .. pos + T - 1 of a kind's tables, as [T, 1, HD] to broadcast over the heads.
local function positions(tables, pos, T)
  local idx = kiln.arange(T, {start = pos})
  return {cos = kiln.gather(tables.cos, idx, 0):reshape(T, 1, HD), sin = kiln.gather(tables.sin, idx, 0):reshape(T, 1, HD)}
end

local function rotate(x, at)                           -- x [T, heads, HD]
  local x1, x2 = x:slice(2, 0, HD // 2), x:slice(2, HD // 2, HD)
  return x * at.cos + kiln.concat({-x2, x1}, 2) * at.sin
end

-- ---- the model, named as the checkpoint names its tensors
local cache = {}
for i = 0, LAYERS - 1 do
  local slots = SLIDING[i] and RING or CTX
  cache[i] = {k = kiln.state("layers." .. i .. ".k", {KV_HEADS, slots, HD}),
              v = kiln.state("layers." .. i .. ".v", {KV_HEADS, slots, HD}), sliding = SLIDING[i]}
end

-- Gemma's RMSNorm: the normalised x times (1 + weight), the weight stored as the offset from 1.
local GemmaNorm = nn.Module("GemmaRMSNorm")
function GemmaNorm:init(d) self.d = d end
function GemmaNorm:forward(x)
  return kiln.rmsnorm(x, 1 + self:param("weight", {self.d}), {eps = EPS})
end
local Norm = GEMMA and GemmaNorm or function(d) return nn.RMSNorm(d, {eps = EPS}) end

local Attention = nn.Module("Attention")
function Attention:init()
  self.q_proj = nn.Linear(DIM, HEADS * HD, {bias = QKV_BIAS})
  self.k_proj = nn.Linear(DIM, KV_HEADS * HD, {bias = QKV_BIAS})
  self.v_proj = nn.Linear(DIM, KV_HEADS * HD, {bias = QKV_BIAS})
  self.o_proj = nn.Linear(HEADS * HD, DIM, {bias = field("attention_bias", false)})
  if QK_NORM then
    self.q_norm = Norm(HD)
    self.k_norm = Norm(HD)
  end
end

-- The keys and values of this chunk into the layer's cache, then attention over it: a
-- full cache at row pos, or (a sliding layer) the ring at slot pos mod its size, read
-- through the window.
local SCALE = GEMMA and field("query_pre_attn_scalar") ^ -0.5 or nil
local function attend(q, k, v, kv, pos, T)
  kiln.write(kv.k, k, {axis = 1, at = pos, ring = kv.sliding})
  kiln.write(kv.v, v, {axis = 1, at = pos, ring = kv.sliding})
  return kiln.sdpa(q, kv.k, kv.v, {len = pos + T, pos = pos, causal = true, scale = SCALE,
                                   window = kv.sliding and WINDOW or nil})
end
function Attention:forward(x, at, kv, pos)
  local T = x:size(0)
  local q = self.q_proj(x):reshape(T, HEADS, HD)
  local k = self.k_proj(x):reshape(T, KV_HEADS, HD)
  if QK_NORM then q, k = self.q_norm(q), self.k_norm(k) end
  q = rotate(q, at):transpose(0, 1)                   -- [HEADS, T, HD]
  k = rotate(k, at):transpose(0, 1)                   -- [KV, T, HD]
  local v = self.v_proj(x):reshape(T, KV_HEADS, HD):transpose(0, 1)
  local out = attend(q, k, v, kv, pos, T)               -- [HEADS, T, HD]
  local y = self.o_proj(out:transpose(0, 1):reshape(T, HEADS * HD))
  return y
end

local MLP = nn.Module("MLP")
function MLP:init()
  self.gate_proj = nn.Linear(DIM, HIDDEN, {bias = MLP_BIAS})
  self.up_proj = nn.Linear(DIM, HIDDEN, {bias = MLP_BIAS})
  self.down_proj = nn.Linear(HIDDEN, DIM, {bias = MLP_BIAS})
end
local ACT = GEMMA and function(x) return kiln.gelu(x, "tanh") end or kiln.silu
function MLP:forward(x)
  local y = self.down_proj(ACT(self.gate_proj(x)) * self.up_proj(x))
  return y
end

local Layer = nn.Module("DecoderLayer")
function Layer:init()
  self.input_layernorm = Norm(DIM)
  self.self_attn = Attention()
  self.post_attention_layernorm = Norm(DIM)
  self.mlp = MLP()
  if GEMMA then
    self.pre_feedforward_layernorm = Norm(DIM)
    self.post_feedforward_layernorm = Norm(DIM)
  end
end
function Layer:forward(x, ats, kv, pos)
  local at = kv.sliding and ats["local"] or ats.global
  if GEMMA then                                        -- norms on both sides of each block
    x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), at, kv, pos))
    return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
  end
  x = x + self.self_attn(self.input_layernorm(x), at, kv, pos)
  return x + self.mlp(self.post_attention_layernorm(x))
end

local Decoder = nn.Module("Model")
function Decoder:init()
  self.embed_tokens = nn.Embedding(VOCAB, DIM)
  self.layers = {}
  for i = 1, LAYERS do self.layers[i] = Layer() end
  self.norm = Norm(DIM)
end
function Decoder:forward(tokens, pos, rows)
  local T = tokens:size(0)
  local ats = {}
  for _, kind in ipairs({"global", "local"}) do
    if ROPE[kind] then ats[kind] = positions(ROPE[kind], pos, T) end
  end
  local x = self.embed_tokens(tokens)
  if GEMMA then x = x * math.sqrt(DIM) end            -- an f32 constant: sqrt rounded to the activation dtype
  for i, layer in ipairs(self.layers) do x = layer(x, ats, cache[i - 1], pos) end
  if rows then x = kiln.gather(x, rows) end           -- the rows whose logits are asked for
  return self.norm(x)
end

local CausalLM = nn.Module("CausalLM")
function CausalLM:init()
  self.model = Decoder()
  if not TIED then self.lm_head = nn.Linear(DIM, VOCAB, {bias = false}) end
end
local SOFTCAP = GEMMA and field("final_logit_softcapping", false)
function CausalLM:forward(tokens, pos, rows)
  local h = self.model(tokens, pos, rows)
  local logits
  if TIED then
    logits = kiln.matmul(h, self.model.embed_tokens:param("weight", {VOCAB, DIM}), {trans_b = true})
  else
    logits = self.lm_head(h)
  end
  if SOFTCAP then logits = kiln.tanh(logits / SOFTCAP) * SOFTCAP end
  return logits
end

local lm = CausalLM()
if where ~= "" then nn.name(lm, "language_model") end

kiln.entry("prefill", function()
  local tokens = kiln.input("tokens", {PREFILL}, "i32")
  local pos = kiln.input("pos", {}, "i32")
  local rows = PREFILL_LOGITS == "last" and kiln.reshape(kiln.input("last", {}, "i32"), {1}) or nil
  kiln.output("logits", lm(tokens, pos, rows))
end)

kiln.entry("decode", function()
  local token = kiln.input("token", {1}, "i32")
  local pos = kiln.input("pos", {}, "i32")
  kiln.output("logits", lm(token, pos))
end)

-- A multimodal checkpoint was loaded leniently: every tensor under language_model. must
-- have been asked for (the text model's own names, as a strict load would check).
if where ~= "" then
  local want = {"model.embed_tokens.weight", "model.norm.weight"}
  if not TIED then want[#want + 1] = "lm_head.weight" end
  local per = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm",
               "self_attn.q_norm", "self_attn.k_norm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
               "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}
  for i = 0, LAYERS - 1 do
    for _, m in ipairs(per) do want[#want + 1] = string.format("model.layers.%d.%s.weight", i, m) end
    if QKV_BIAS then
      for _, m in ipairs({"q_proj", "k_proj", "v_proj", "o_proj"}) do
        want[#want + 1] = string.format("model.layers.%d.self_attn.%s.bias", i, m)
      end
    end
  end
  local wanted = {}
  for _, n in ipairs(want) do
    wanted["language_model." .. n] = true
    if not loaded["language_model." .. n] then error(cfg_file .. ": the checkpoint has no tensor language_model." .. n) end
  end
  local extra = {}
  for n in pairs(loaded) do
    if n:sub(1, 15) == "language_model." and not wanted[n] then extra[#extra + 1] = n end
  end
  table.sort(extra)
  if #extra > 0 then error(loaded[extra[1]] .. ": tensor " .. extra[1] .. " is not used by llm.lua (gemma3)") end
end
