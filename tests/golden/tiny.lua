-- tiny.lua — the golden model of t_golden: small enough to read its generated C in full,
-- varied enough to show each kind of kernel a reviewer meets (a contraction with a bias,
-- a normalisation, an elementwise op, a softmax, a reduction, a view).
-- Weights come from the seeded initialiser, so the build needs no file.
local nn = kiln.nn
kiln.seed(3)

local Head = nn.Module("Head")
function Head:init(d_in, d_out)
  self.proj = nn.Linear(d_in, d_out)
  self.norm = nn.LayerNorm(d_out)
end
function Head:forward(x)
  local h = kiln.gelu(self.norm(self.proj(x)))
  return kiln.softmax(h, -1)
end

local features = kiln.input("features", {2, 8})
local probs = Head(8, 4)(features)
kiln.output("probs", probs)
kiln.output("peak", kiln.amax(kiln.reshape(probs, {8}), 0, true))  -- [1]: Core ML has no rank 0
