-- qmix_ggml.lua — tests/quant/qmix.lua built with --activations ggml (qmix_ggml.args): t_isa
-- compares the bits of its activation rounding (rint, round_f16, the reductions) and of the
-- products after it across instruction sets.
require "qmix"
