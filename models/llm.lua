-- llm.lua — decoder-only language models from a Hugging Face checkpoint directory, with a
-- key/value cache: entry `prefill` runs a chunk of tokens, entry `decode` one.
--
--   kiln build models/llm.lua -o out -D checkpoint=DIR [-D max_context=N] [-D prefill=T]
--
-- DIR holds config.json and the weights as published: model.safetensors, or shards listed
-- by model.safetensors.index.json. model_type (config.json) picks the family:
--   llama   Llama 2 and 3.x: RMSNorm, rotary embeddings (rope_theta; rope_scaling
--           "llama3" or none), grouped-query attention, SwiGLU MLP, tied or untied head;
--           attention_bias / mlp_bias honoured
--   qwen2   Llama with a bias on q, k and v
--   qwen3   Llama with RMSNorm on every query and key head (q_norm, k_norm) before the
--           rotation, head_dim from the config
-- A config field this script does not support (another rope_scaling type, another
-- hidden_act, sliding windows) is an error naming it; fields that do not change the
-- computation (torch_dtype, bos_token_id, ...) are ignored.
--
-- The rotation uses Hugging Face's layout: a head's two halves (x1, x2) turn as
-- (x1 cos - x2 sin, x2 cos + x1 sin), frequencies theta^(-2i/head_dim). The cos/sin tables
-- for max_context positions are computed here in double precision and stored as f32
-- constants (the generated code computes no trigonometry).
--
-- State: per layer the keys and values of every position so far, layers.<i>.k/.v,
-- f32 [kv heads, max_context, head_dim]. Both entries take the position of their first
-- token `pos` (an i32 scalar) and return logits for every token they were given:
--   prefill  tokens i32 [prefill], pos -> logits f32 [prefill, vocab]
--   decode   token i32 [1], pos -> logits f32 [1, vocab]
-- A write past max_context makes the generated C return <M>_E_RANGE before touching
-- anything.
local kiln = require "kiln"
local nn = require "kiln.nn"

local dir = kiln.path("checkpoint", "weights/tiny-llm")   -- default: a seeded 2-layer Llama (models/weights/README.md)
local cfg_file = dir .. "/config.json"
local cfg = kiln.json(cfg_file)

-- A config value: number/string/boolean as the file has it, or the default when the
-- field is absent or null; a missing required field names itself.
local function field(name, default)
  local v = cfg[name]
  if v == nil or v == kiln.null then
    if default == nil then error(cfg_file .. ": field " .. name .. " is missing", 2) end
    return default
  end
  return v
end
local function unsupported(name, why) error(cfg_file .. ": " .. name .. " " .. why .. " is not supported by llm.lua", 2) end

local FAMILY = field("model_type")
if FAMILY ~= "llama" and FAMILY ~= "qwen2" and FAMILY ~= "qwen3" then
  unsupported("model_type", string.format("%q (llama, qwen2, qwen3)", FAMILY))
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
local TIED = field("tie_word_embeddings", false)
local QKV_BIAS = FAMILY == "qwen2" or field("attention_bias", false)
local MLP_BIAS = field("mlp_bias", false)
local QK_NORM = FAMILY == "qwen3"
if field("hidden_act", "silu") ~= "silu" then unsupported("hidden_act", string.format("%q (silu)", cfg.hidden_act)) end
if HEADS % KV_HEADS ~= 0 then error(cfg_file .. ": num_attention_heads is not a multiple of num_key_value_heads") end
if field("use_sliding_window", false) then unsupported("use_sliding_window", "true") end

local CTX = kiln.option("max_context", math.min(field("max_position_embeddings", 2048), 2048))
local PREFILL = kiln.option("prefill", 32)

-- ---- weights: one file, or the shards an index lists (each loaded once, in name order)
if kiln.exists(dir .. "/model.safetensors.index.json") then
  local index = kiln.json(dir .. "/model.safetensors.index.json")
  local shards, seen = {}, {}
  for _, file in pairs(index.weight_map) do
    if not seen[file] then seen[file] = true; shards[#shards + 1] = file end
  end
  table.sort(shards)
  for _, file in ipairs(shards) do kiln.load(dir .. "/" .. file, {strict = true}) end
else
  kiln.load(dir .. "/model.safetensors", {strict = true})
end

-- ---- rotary tables: inverse frequencies (with Llama 3's scaling), then cos/sin [CTX, HD]
local function inv_freqs()
  local f = {}
  for i = 0, HD // 2 - 1 do f[i + 1] = 1.0 / THETA ^ (2 * i / HD) end
  local rs = cfg.rope_scaling
  if rs == nil or rs == kiln.null then return f end
  local kind = rs.rope_type or rs.type
  if kind ~= "llama3" then unsupported("rope_scaling", string.format("type %q (llama3, or none)", tostring(kind))) end
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
  return f
end

local function rope_tables()
  local f, cos, sin = inv_freqs(), {}, {}
  for p = 0, CTX - 1 do
    for half = 0, 1 do
      for i = 1, HD // 2 do
        cos[#cos + 1] = math.cos(p * f[i])
        sin[#sin + 1] = math.sin(p * f[i])
      end
    end
  end
  return kiln.constant(cos, {CTX, HD}), kiln.constant(sin, {CTX, HD})
end
local COS, SIN = rope_tables()

-- Rows pos .. pos + T - 1 of the tables, as [T, 1, HD] to broadcast over the heads.
local function positions(pos, T)
  local idx = kiln.arange(T, {start = pos})
  return {cos = kiln.gather(COS, idx, 0):reshape(T, 1, HD), sin = kiln.gather(SIN, idx, 0):reshape(T, 1, HD)}
end

local function rotate(x, at)                           -- x [T, heads, HD]
  local x1, x2 = x:slice(2, 0, HD // 2), x:slice(2, HD // 2, HD)
  return x * at.cos + kiln.concat({-x2, x1}, 2) * at.sin
end

-- ---- the model, named as the checkpoint names its tensors
local cache = {}
for i = 0, LAYERS - 1 do
  cache[i] = {k = kiln.state("layers." .. i .. ".k", {KV_HEADS, CTX, HD}),
              v = kiln.state("layers." .. i .. ".v", {KV_HEADS, CTX, HD})}
end

local Attention = nn.Module("Attention")
function Attention:init()
  self.q_proj = nn.Linear(DIM, HEADS * HD, {bias = QKV_BIAS})
  self.k_proj = nn.Linear(DIM, KV_HEADS * HD, {bias = QKV_BIAS})
  self.v_proj = nn.Linear(DIM, KV_HEADS * HD, {bias = QKV_BIAS})
  self.o_proj = nn.Linear(HEADS * HD, DIM, {bias = field("attention_bias", false)})
  if QK_NORM then
    self.q_norm = nn.RMSNorm(HD, {eps = EPS})
    self.k_norm = nn.RMSNorm(HD, {eps = EPS})
  end
end
function Attention:forward(x, at, kv, pos)
  local T = x:size(0)
  local q = self.q_proj(x):reshape(T, HEADS, HD)
  local k = self.k_proj(x):reshape(T, KV_HEADS, HD)
  if QK_NORM then q, k = self.q_norm(q), self.k_norm(k) end
  q = rotate(q, at):transpose(0, 1)                   -- [HEADS, T, HD]
  k = rotate(k, at):transpose(0, 1)                   -- [KV, T, HD]
  local v = self.v_proj(x):reshape(T, KV_HEADS, HD):transpose(0, 1)
  kiln.write(kv.k, k, {axis = 1, at = pos})
  kiln.write(kv.v, v, {axis = 1, at = pos})
  local out = kiln.sdpa(q, kv.k, kv.v, {len = pos + T, pos = pos, causal = true})   -- [HEADS, T, HD]
  local y = self.o_proj(out:transpose(0, 1):reshape(T, HEADS * HD))
  return y
end

local MLP = nn.Module("MLP")
function MLP:init()
  self.gate_proj = nn.Linear(DIM, HIDDEN, {bias = MLP_BIAS})
  self.up_proj = nn.Linear(DIM, HIDDEN, {bias = MLP_BIAS})
  self.down_proj = nn.Linear(HIDDEN, DIM, {bias = MLP_BIAS})
end
function MLP:forward(x)
  local y = self.down_proj(kiln.silu(self.gate_proj(x)) * self.up_proj(x))
  return y
end

local Layer = nn.Module("DecoderLayer")
function Layer:init()
  self.input_layernorm = nn.RMSNorm(DIM, {eps = EPS})
  self.self_attn = Attention()
  self.post_attention_layernorm = nn.RMSNorm(DIM, {eps = EPS})
  self.mlp = MLP()
end
function Layer:forward(x, at, kv, pos)
  x = x + self.self_attn(self.input_layernorm(x), at, kv, pos)
  return x + self.mlp(self.post_attention_layernorm(x))
end

local Decoder = nn.Module("Model")
function Decoder:init()
  self.embed_tokens = nn.Embedding(VOCAB, DIM)
  self.layers = {}
  for i = 1, LAYERS do self.layers[i] = Layer() end
  self.norm = nn.RMSNorm(DIM, {eps = EPS})
end
function Decoder:forward(tokens, pos)
  local at = positions(pos, tokens:size(0))
  local x = self.embed_tokens(tokens)
  for i, layer in ipairs(self.layers) do x = layer(x, at, cache[i - 1], pos) end
  return self.norm(x)
end

local CausalLM = nn.Module("CausalLM")
function CausalLM:init()
  self.model = Decoder()
  if not TIED then self.lm_head = nn.Linear(DIM, VOCAB, {bias = false}) end
end
function CausalLM:forward(tokens, pos)
  local h = self.model(tokens, pos)
  if TIED then
    local logits = kiln.matmul(h, self.model.embed_tokens:param("weight", {VOCAB, DIM}), {trans_b = true})
    return logits
  end
  return self.lm_head(h)
end

local lm = CausalLM()

kiln.entry("prefill", function()
  local tokens = kiln.input("tokens", {PREFILL}, "i32")
  local pos = kiln.input("pos", {}, "i32")
  kiln.output("logits", lm(tokens, pos))
end)

kiln.entry("decode", function()
  local token = kiln.input("token", {1}, "i32")
  local pos = kiln.input("pos", {}, "i32")
  kiln.output("logits", lm(token, pos))
end)
