-- narrow_llama.lua — the peer benchmark's Llama prefill (bench/peerbench/models/
-- llama_prefill128.lua) at a test's size, with seeded weights: 2 layers, 16 tokens, dim 32,
-- 4 query heads of 8 over 2 key/value heads, SwiGLU 32 -> 48, RMSNorm, RoPE by the
-- half-split tables, a causal mask; the output is the last position's logits, so
-- pass_narrow computes the last layer for that row (tests/passes/narrowcheck.py).
local kiln = require "kiln"
local nn = require "kiln.nn"

local T, DIM, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 16, 32, 2, 4, 2, 48, 40
local HD = DIM // HEADS

local Rope = nn.Module("Rope")
function Rope:forward(x)
  local cos = self:param("cos", {T, HD}):reshape(T, 1, HD)
  local sin = self:param("sin", {T, HD}):reshape(T, 1, HD)
  local x1, x2 = x:slice(2, 0, HD // 2), x:slice(2, HD // 2, HD)
  return x * cos + kiln.concat({-x2, x1}, 2) * sin
end

local Attention = nn.Module("Attention")
function Attention:init()
  self.wq = nn.Linear(DIM, HEADS * HD, {bias = false})
  self.wk = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wv = nn.Linear(DIM, KV_HEADS * HD, {bias = false})
  self.wo = nn.Linear(HEADS * HD, DIM, {bias = false})
end
function Attention:forward(x, rope, mask)
  local rep = HEADS // KV_HEADS
  local q = rope(self.wq(x):reshape(T, HEADS, HD)):reshape(T, KV_HEADS, rep, HD):permute(1, 2, 0, 3)
  local k = rope(self.wk(x):reshape(T, KV_HEADS, HD)):transpose(0, 1):unsqueeze(1)
  local v = self.wv(x):reshape(T, KV_HEADS, HD):transpose(0, 1):unsqueeze(1)
  local scores = kiln.matmul(q, k, {trans_b = true}) * (1 / math.sqrt(HD)) + mask
  local out = kiln.matmul(kiln.softmax(scores, -1), v)
  return self.wo(out:permute(2, 0, 1, 3):reshape(T, DIM))
end

local Block = nn.Module("Block")
function Block:init()
  self.attention_norm = nn.RMSNorm(DIM)
  self.attention = Attention()
  self.ffn_norm = nn.RMSNorm(DIM)
  self.w1 = nn.Linear(DIM, FFN, {bias = false})
  self.w2 = nn.Linear(FFN, DIM, {bias = false})
  self.w3 = nn.Linear(DIM, FFN, {bias = false})
end
function Block:forward(x, rope, mask)
  x = x + self.attention(self.attention_norm(x), rope, mask)
  local h = self.ffn_norm(x)
  return x + self.w2(kiln.silu(self.w1(h)) * self.w3(h))
end

local Llama = nn.Module("Llama")
function Llama:init()
  self.tok_embeddings = nn.Embedding(VOCAB, DIM)
  self.rope = Rope()
  self.layers = {}
  for i = 1, LAYERS do self.layers[i] = Block() end
  self.norm = nn.RMSNorm(DIM)
  self.output = nn.Linear(DIM, VOCAB, {bias = false})
end
function Llama:forward(tokens, mask)
  local x = self.tok_embeddings(tokens)
  for _, layer in ipairs(self.layers) do x = layer(x, self.rope, mask) end
  return self.output(self.norm(x:slice(0, T - 1, T)))
end

local causal = {}
for i = 0, T - 1 do
  for j = 0, T - 1 do causal[#causal + 1] = j <= i and 0 or -1e9 end
end
kiln.output("y", Llama()(kiln.input("tokens", {T}, "i32"), kiln.constant(causal, {T, T})))
