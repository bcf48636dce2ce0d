-- llama_prefill128.lua — peer benchmark workload llama_prefill128: a 125M-parameter Llama
-- run statelessly on 128 tokens (a prompt's prefill, without keeping the KV cache).
--
-- Config (workloads.py LLAMA): dim 768, 12 layers, 12 query heads of 64, 4 key/value
-- heads (grouped-query attention: query head h reads kv head h // 3), SwiGLU feed-forward
-- 768 -> 2048 -> 768, RMSNorm eps 1e-5, rotary embeddings (theta 10000, the "half-split"
-- layout: rotate_half(x) = (-x2, x1)), causal softmax attention scaled by 1/8, vocab 32000,
-- an untied output head. Input `tokens` i32 [128]; output `y` f32 [1, 32000], the logits of
-- the last position (a prefill needs no others). The rotary tables are the twin's buffers
-- rope.cos / rope.sin [128, 64], so the build computes no trigonometry. Weights under
-- Meta's names (layers.0.attention.wq.weight, ...), from the PyTorch twin (workloads.py Llama).
local kiln = require "kiln"
local nn = require "kiln.nn"

local T, DIM, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 128, 768, 12, 12, 4, 2048, 32000
local HD = DIM // HEADS

kiln.load(require("nets").weights("llama"), {strict = true})

-- x * cos + rotate_half(x) * sin on x [T, heads, HD], with the tables [T, 1, HD].
local Rope = nn.Module("Rope")
function Rope:forward(x)
  local cos = self:param("cos", {T, HD}):reshape(T, 1, HD)
  local sin = self:param("sin", {T, HD}):reshape(T, 1, HD)
  local x1, x2 = x:slice(2, 0, HD // 2), x:slice(2, HD // 2, HD)
  local y = x * cos + kiln.concat({-x2, x1}, 2) * sin
  return y
end

local Attention = nn.Module("Attention")
function Attention:init()
  self.wq = nn.Linear(DIM, HEADS * HD, {bias = false})
  self.wk = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wv = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wo = nn.Linear(HEADS * HD, DIM, {bias = false})
end
-- q viewed as [KV_HEADS, rep, T, HD] against k, v as [KV_HEADS, 1, T, HD]: the matmuls
-- broadcast over the group instead of copying k and v (torch's repeat_interleave).
function Attention:forward(x, rope, mask)
  local rep = HEADS // KV_HEADS
  local q = rope(self.wq(x):reshape(T, HEADS, HD)):reshape(T, KV_HEADS, rep, HD):permute(1, 2, 0, 3)
  local k = rope(self.wk(x):reshape(T, KV_HEADS, HD)):transpose(0, 1):unsqueeze(1)
  local v = self.wv(x):reshape(T, KV_HEADS, HD):transpose(0, 1):unsqueeze(1)
  local scores = kiln.matmul(q, k, {trans_b = true}) * (1 / math.sqrt(HD)) + mask   -- [KV, rep, T, T]
  local out = kiln.matmul(kiln.softmax(scores, -1), v)                                -- [KV, rep, T, HD]
  local y = self.wo(out:permute(2, 0, 1, 3):reshape(T, DIM))
  return y
end

local FeedForward = nn.Module("FeedForward")
function FeedForward:init()
  self.w1 = nn.Linear(DIM, FFN, {bias = false})
  self.w2 = nn.Linear(FFN, DIM, {bias = false})
  self.w3 = nn.Linear(DIM, FFN, {bias = false})
end
function FeedForward:forward(x)
  local y = self.w2(kiln.silu(self.w1(x)) * self.w3(x))
  return y
end

local Block = nn.Module("Block")
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

local Llama = nn.Module("Llama")
function Llama:init()
  self.tok_embeddings = nn.Embedding(VOCAB, DIM)
  self.rope = Rope()
  self.layers = {}
  for i = 1, LAYERS do self.layers[i] = Block() end
  self.norm = nn.RMSNorm(DIM, {eps = 1e-5})
  self.output = nn.Linear(DIM, VOCAB, {bias = false})
end
function Llama:forward(tokens, mask)
  local x = self.tok_embeddings(tokens)                                  -- [T, DIM]
  for _, layer in ipairs(self.layers) do x = layer(x, self.rope, mask) end
  local y = self.output(self.norm(x:slice(0, T - 1, T)))                 -- [1, VOCAB]
  return y
end

-- Causal mask: 0 where key j <= query i, else -1e9 (exp of it underflows to exactly 0, as
-- the twin's -inf does).
local causal = {}
for i = 0, T - 1 do
  for j = 0, T - 1 do causal[#causal + 1] = j <= i and 0 or -1e9 end
end
local mask = kiln.constant(causal, {T, T})

local tokens = kiln.input("tokens", {T}, "i32")
kiln.output("y", Llama()(tokens, mask))
