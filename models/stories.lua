-- stories.lua — TinyStories 260K: a real trained Llama (llama2.c's stories260K, MIT licence),
-- with a key/value cache: entry `prefill` runs a chunk of 32 tokens, entry `decode` one.
--
-- Andrej Karpathy's smallest tinyllamas checkpoint, converted by scripts/convert_llama2c.py
-- into weights/stories260K.safetensors under Meta's Llama state_dict names (provenance in
-- weights/README.md). Architecture (llama2.c's run.c):
--   x = tok_embeddings[tokens]                                   dim 64, vocab 512
--   5 x { x = x + wo(attention(rope(wq h), rope(wk h), wv h)),  h = attention_norm(x)
--         x = x + w2(silu(w1 h) * w3 h),                         h = ffn_norm(x) }
--   logits = norm(x) @ tok_embeddings^T                          (shared classifier)
-- RMSNorm eps 1e-5; 8 query heads of 8, 4 key/value heads (grouped-query attention: query
-- head h reads kv head h // 2); causal softmax attention scaled by 1/sqrt(8); RoPE rotates
-- the pairs (2i, 2i+1) of each head by pos * 10000^(-2i/8), through the cos/sin tables the
-- checkpoint itself carries (rope.cos, rope.sin [512, 4]), so the build computes no
-- trigonometry and its bytes do not depend on a libm.
--
-- State: per layer the keys and values of every position so far, layers.<i>.k and
-- layers.<i>.v, f32 [4 kv heads, 512 positions, 8] (the checkpoint's full 512 positions).
-- Both entries take the position of their first token, `pos` (an i32 scalar):
--   prefill  tokens i32 [32], pos -> logits f32 [32, 512]: row i predicts the token after
--            position pos + i. A prompt shorter than 32 is padded with any token: the
--            padding writes cache rows past the prompt, which the decode at that position
--            overwrites before anything reads them.
--   decode   token i32 [1], pos -> logits f32 [1, 512]
-- Each writes its keys and values at rows pos.. of the caches, then attends over rows
-- 0 .. pos + i (kiln.sdpa, causal, which loops only over the rows in use); a pos that
-- would write past row 511 makes the generated C return STORIES_E_RANGE before touching
-- anything.
local kiln = require "kiln"
local nn = require "kiln.nn"

local PREFILL = 32                  -- tokens of one prefill call
local DIM, HIDDEN, LAYERS, VOCAB = 64, 172, 5, 512
local HEADS, KV_HEADS = 8, 4
local HD = DIM // HEADS             -- 8
local CTX = 512                     -- positions: the checkpoint's seq_len, the caches' length

kiln.load("weights/stories260K.safetensors", {strict = true})

local cache = {}
for i = 0, LAYERS - 1 do
  cache[i] = {k = kiln.state("layers." .. i .. ".k", {KV_HEADS, CTX, HD}),
              v = kiln.state("layers." .. i .. ".v", {KV_HEADS, CTX, HD})}
end

-- RoPE's tables for the positions of one call, made once per entry from its `pos`: rows
-- pos .. pos + T - 1 of the checkpoint's cos/sin tables, interleaved to [T, 1, HD] as
-- C = (cos, cos), S = (sin, sin).
local function positions(pos, T)
  local idx = kiln.arange(T, {start = pos})                              -- i32 [T]: pos + i
  local function interleave(t)                                           -- [CTX, HD/2] -> [T, 1, HD]
    local r = kiln.gather(t, idx, 0):unsqueeze(2)
    return kiln.concat({r, r}, 2):reshape(T, 1, HD)
  end
  local cos = interleave(kiln.param("rope.cos", {CTX, HD // 2}))   -- one parameter, shared by name
  local sin = interleave(kiln.param("rope.sin", {CTX, HD // 2}))
  return {cos = cos, sin = sin}
end

-- RoPE rotates each pair (a, b) = (x[2i], x[2i+1]) of a head by the angle of (pos, i):
-- (a cos - b sin, a sin + b cos), written as x * C + swap(x) * S with swap(x)[2i] =
-- -x[2i+1], swap(x)[2i+1] = x[2i]: one small matmul with a constant signed permutation
-- (exact: one nonzero product per output), then a multiply-add.
local Rope = nn.Module("Rope")
function Rope:swap()
  if not self._swap then
    local swap = {}
    for i = 0, HD - 1 do
      for j = 0, HD - 1 do      -- column 2i takes -x[2i+1], column 2i+1 takes x[2i]
        local v = 0
        if j % 2 == 0 and i == j + 1 then v = -1 elseif j % 2 == 1 and i == j - 1 then v = 1 end
        swap[#swap + 1] = v
      end
    end
    self._swap = kiln.constant(swap, {HD, HD})
  end
  return self._swap
end
function Rope:forward(x, at)                           -- x: [T, heads, HD]
  local y = x * at.cos + kiln.matmul(x, self:swap()) * at.sin
  return y
end

local Attention = nn.Module("Attention")
function Attention:init()
  self.wq = nn.Linear(DIM, HEADS * HD, {bias = false})
  self.wk = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wv = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wo = nn.Linear(HEADS * HD, DIM, {bias = false})
end

-- Grouped-query attention over the cache: this call's keys and values go to rows pos..
-- of the layer's caches, then kiln.sdpa attends with query head h reading kv head
-- h // (HEADS/KV_HEADS), query row i (position pos + i) seeing cache rows 0 .. pos + i:
-- the rows not yet written, zero or left from padding, never count, and the kernel loops
-- only over the rows it sees. Scale 1/sqrt(HD).
function Attention:forward(x, rope, at, kv, pos)
  local T = x:size(0)
  local q = rope(self.wq(x):reshape(T, HEADS, HD), at):transpose(0, 1)      -- [HEADS, T, HD]
  local k = rope(self.wk(x):reshape(T, KV_HEADS, HD), at):transpose(0, 1)   -- [KV, T, HD]
  local v = self.wv(x):reshape(T, KV_HEADS, HD):transpose(0, 1)
  kiln.write(kv.k, k, {axis = 1, at = pos})
  kiln.write(kv.v, v, {axis = 1, at = pos})
  local out = kiln.sdpa(q, kv.k, kv.v, {len = pos + T, pos = pos, causal = true})   -- [HEADS, T, HD]
  local y = self.wo(out:transpose(0, 1):reshape(T, DIM))
  return y
end

local FeedForward = nn.Module("FeedForward")
function FeedForward:init()
  self.w1 = nn.Linear(DIM, HIDDEN, {bias = false})
  self.w2 = nn.Linear(HIDDEN, DIM, {bias = false})
  self.w3 = nn.Linear(DIM, HIDDEN, {bias = false})
end
function FeedForward:forward(x)
  local y = self.w2(kiln.silu(self.w1(x)) * self.w3(x))
  return y
end

local Block = nn.Module("TransformerBlock")
function Block:init()
  self.attention_norm = nn.RMSNorm(DIM, {eps = 1e-5})
  self.attention = Attention()
  self.ffn_norm = nn.RMSNorm(DIM, {eps = 1e-5})
  self.feed_forward = FeedForward()
end
function Block:forward(x, rope, at, kv, pos)
  x = x + self.attention(self.attention_norm(x), rope, at, kv, pos)
  return x + self.feed_forward(self.ffn_norm(x))
end

local Llama = nn.Module("Transformer")
function Llama:init()
  self.tok_embeddings = nn.Embedding(VOCAB, DIM)
  self.rope = Rope()
  self.layers = {}
  for i = 1, LAYERS do self.layers[i] = Block() end
  self.norm = nn.RMSNorm(DIM, {eps = 1e-5})
end
function Llama:forward(tokens, pos)
  local T = tokens:size(0)
  local at = positions(pos, T)
  local x = self.tok_embeddings(tokens)                                  -- [T, DIM]
  for i, layer in ipairs(self.layers) do x = layer(x, self.rope, at, cache[i - 1], pos) end
  local emb = self.tok_embeddings:param("weight", {VOCAB, DIM})          -- shared classifier
  local logits = kiln.matmul(self.norm(x), emb, {trans_b = true})        -- [T, VOCAB]
  return logits
end

local model = Llama()     -- one module tree: both entries use the same parameters

kiln.entry("prefill", function()
  local tokens = kiln.input("tokens", {PREFILL}, "i32")
  local pos = kiln.input("pos", {}, "i32")
  kiln.output("logits", model(tokens, pos))
end)

kiln.entry("decode", function()
  local token = kiln.input("token", {1}, "i32")
  local pos = kiln.input("pos", {}, "i32")
  kiln.output("logits", model(token, pos))
end)
