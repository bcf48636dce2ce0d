-- stories_fixed.lua — models/stories.lua as it was before the KV cache: one stateless
-- fixed-length forward (32 positions, a causal mask, no state). Kept because the Metal and
-- CoreML targets do not support state and entry points yet: this is the TinyStories
-- network every target builds and every suite that iterates models/*.lua checks.
--
-- TinyStories 260K: a real trained Llama (llama2.c's stories260K, MIT licence).
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
-- The forward pass has a FIXED length: input `tokens` i32 [T] (T = 32), output `logits`
-- f32 [T, 512]; row p predicts the token after position p. Causality makes row p depend on
-- tokens 0..p only, so a caller generating text fills the first n positions, pads the rest
-- with anything and reads row n - 1.
local kiln = require "kiln"
local nn = require "kiln.nn"

local T = 32                        -- sequence length of one run
local DIM, HIDDEN, LAYERS, VOCAB = 64, 172, 5, 512
local HEADS, KV_HEADS = 8, 4
local HD = DIM // HEADS             -- 8
local ROPE_ROWS = 512               -- the checkpoint's seq_len

kiln.load("weights/stories260K.safetensors", {strict = true})

-- RoPE rotates each pair (a, b) = (x[2i], x[2i+1]) of a head by the angle of (pos, i):
-- (a cos - b sin, a sin + b cos). Written as x * C + swap(x) * S with swap(x)[2i] = -x[2i+1],
-- swap(x)[2i+1] = x[2i] (one small matmul with a constant signed permutation, exact: one
-- nonzero product per output) and the tables C = (cos, cos), S = (sin, sin) interleaved to
-- [T, 1, HD], built once from the file's tables sliced to the first T positions. This keeps
-- the rotation to a matmul and a multiply-add per use instead of slices and concats.
local Rope = nn.Module("Rope")
function Rope:tables()
  if not self._c then
    local function interleave(t)                       -- [ROPE_ROWS, HD/2] -> [T, 1, HD]
      local r = t:slice(0, 0, T):unsqueeze(2)
      return kiln.concat({r, r}, 2):reshape(T, 1, HD)
    end
    self._c = interleave(self:param("cos", {ROPE_ROWS, HD // 2}))
    self._s = interleave(self:param("sin", {ROPE_ROWS, HD // 2}))
    local swap = {}
    for i = 0, HD - 1 do
      for j = 0, HD - 1 do      -- swap = x @ P: column 2i takes -x[2i+1], column 2i+1 takes x[2i]
        local v = 0
        if j % 2 == 0 and i == j + 1 then v = -1 elseif j % 2 == 1 and i == j - 1 then v = 1 end
        swap[#swap + 1] = v
      end
    end
    self._swap = kiln.constant(swap, {HD, HD})
  end
  return self._c, self._s, self._swap
end
function Rope:forward(x)                               -- x: [T, heads, HD]
  local c, s, swap = self:tables()
  local y = x * c + kiln.matmul(x, swap) * s
  return y
end

local Attention = nn.Module("Attention")
function Attention:init()
  self.wq = nn.Linear(DIM, HEADS * HD, {bias = false})
  self.wk = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wv = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wo = nn.Linear(HEADS * HD, DIM, {bias = false})
end

-- Grouped-query attention without copying k and v: query head h = 2g + r (r < HEADS/KV_HEADS)
-- reads kv head g, so q is viewed as [KV_HEADS, HEADS/KV_HEADS, T, HD] against k, v as
-- [KV_HEADS, 1, T, HD] and the matmuls broadcast over the group (torch's repeat_interleave
-- of k and v on the head dim, without materialising it).
function Attention:forward(x, rope, mask)
  local rep = HEADS // KV_HEADS
  local q = rope(self.wq(x):reshape(T, HEADS, HD)):reshape(T, KV_HEADS, rep, HD):permute(1, 2, 0, 3)
  local k = rope(self.wk(x):reshape(T, KV_HEADS, HD)):transpose(0, 1):unsqueeze(1)   -- [KV, 1, T, HD]
  local v = self.wv(x):reshape(T, KV_HEADS, HD):transpose(0, 1):unsqueeze(1)
  local scores = kiln.matmul(q, k, {trans_b = true}) * (1 / math.sqrt(HD)) + mask    -- [KV, rep, T, T]
  local out = kiln.matmul(kiln.softmax(scores, -1), v)                                 -- [KV, rep, T, HD]
  local y = self.wo(out:permute(2, 0, 1, 3):reshape(T, DIM))
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
function Block:forward(x, rope, mask)
  x = x + self.attention(self.attention_norm(x), rope, mask)
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
function Llama:forward(tokens, mask)
  local x = self.tok_embeddings(tokens)                                  -- [T, DIM]
  for _, layer in ipairs(self.layers) do x = layer(x, self.rope, mask) end
  local emb = self.tok_embeddings:param("weight", {VOCAB, DIM})          -- shared classifier
  local logits = kiln.matmul(self.norm(x), emb, {trans_b = true})        -- [T, VOCAB]
  return logits
end

-- Causal mask: 0 where key j <= query i, else a large negative number (exp underflows to
-- exactly 0, in float16 too, where -1e4 stays finite).
local causal = {}
for i = 0, T - 1 do
  for j = 0, T - 1 do causal[#causal + 1] = j <= i and 0 or -1e4 end
end
local mask = kiln.constant(causal, {T, T})

local tokens = kiln.input("tokens", {T}, "i32")
kiln.output("logits", Llama()(tokens, mask))
