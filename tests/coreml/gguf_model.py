"""gguf_model.py — writes DIR/w.gguf and DIR/g.lua: t_qkernels' GGUF model (tests/quant/
run_qmodels.py), for the Core ML target.

usage: gguf_model.py DIR

A GGUF file whose matrices are F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K ggml blocks (the
K-quants with random scale bytes, so every 6-bit scale and min and q6_k's int8 scale -128
can appear), each read as a Linear weight [48, 256] and as an embedding table [40, 256];
the build keeps each in its file's format.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "quant"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
import gguf_file as G  # noqa: E402
import run_qmodels as Q  # noqa: E402


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(9)
    K, N, V = 256, 48, 40
    tensors = []
    lua = ['local kiln = require "kiln"', 'kiln.load("w.gguf", {strict = true})',
           'local x = kiln.input("x", {3, %d})' % K, 'local ids = kiln.input("ids", {4}, "i32")']
    for t in Q.GGUF_TYPES:
        for name, rows in (("lin_%s.weight" % t, N), ("emb_%s.weight" % t, V)):
            tensors.append((name, t, (rows, K), Q.gguf_tensor(rng, t, rows, K)))
        lua.append('kiln.output("lin_%s", kiln.linear(x, kiln.param("lin_%s.weight", {%d, %d})))' % (t, t, N, K))
        lua.append('kiln.output("emb_%s", kiln.embedding(kiln.param("emb_%s.weight", {%d, %d}), ids))' % (t, t, V, K))
    G.write(os.path.join(d, "w.gguf"), [("general.architecture", G.STR, "test")], tensors)
    open(os.path.join(d, "g.lua"), "w").write("\n".join(lua) + "\n")


main()
