#!/usr/bin/python3
"""convert_llama2c.py — llama2.c's stories260K.bin into the safetensors file models/stories.lua loads.

Run once by hand (its outputs are committed; the source files are not shipped elsewhere):

    /usr/bin/python3 scripts/convert_llama2c.py SRC_DIR [--out models/weights]

SRC_DIR holds stories260K.bin and tok512.bin (Karpathy's tinyllamas checkpoint for llama2.c,
MIT licence). Writes OUT/stories260K.safetensors and copies OUT/tok512.bin byte for byte.

The checkpoint is llama2.c's legacy format: 7 little-endian int32 (dim, hidden_dim, n_layers,
n_heads, n_kv_heads, vocab_size, seq_len; a positive vocab_size means the classifier shares the
token embedding), then f32 arrays stacked over layers. They are split per layer and named as
Meta's Llama state_dict (tok_embeddings.weight, layers.N.attention.wq.weight, ...
layers.N.feed_forward.w1.weight, norm.weight), kept f32 (1 MB: no reason to round).

RoPE: the file ends with two tables freq_cis_real/imag [seq_len, head_size/2] (cos and sin of
pos * theta^(-2i/head_size)). They are stored as `rope.cos`/`rope.sin` so the Kiln build does
no trigonometry at all — cosf/sinf differ between libms in the last bit, and that would break
byte-identical outputs across machines. The converter checks them against numpy's cos/sin
(theta 10000) to make sure they are what we think they are. The tables are written whole
(seq_len rows); the model slices the first T rows.

The safetensors file is written without the safetensors package: 8-byte little-endian header
length, JSON header (sorted names, __metadata__), padded with spaces to a multiple of 8, then
the tensors back to back in the header's order.
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import sys

import numpy as np

SHA256 = {
    "stories260K.bin": "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696",
    "tok512.bin": "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312",
}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_checkpoint(path):
    """Returns (config dict, {llama name: f32 array}) of a llama2.c legacy checkpoint."""
    with open(path, "rb") as f:
        blob = f.read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", blob[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // heads
    kv_dim = dim * kv_heads // heads
    data = np.frombuffer(blob, dtype="<f4", offset=28)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        a = data[pos:pos + n].reshape(shape).astype(np.float32)
        pos += n
        return a

    emb = take(vocab, dim)
    rms_att = take(layers, dim)
    wq = take(layers, dim, dim)
    wk = take(layers, kv_dim, dim)
    wv = take(layers, kv_dim, dim)
    wo = take(layers, dim, dim)
    rms_ffn = take(layers, dim)
    w1 = take(layers, hidden, dim)
    w2 = take(layers, dim, hidden)
    w3 = take(layers, hidden, dim)
    rms_final = take(dim)
    cos = take(seq_len, hd // 2)
    sin = take(seq_len, hd // 2)
    if not shared:
        sys.exit("convert_llama2c: %s has a separate classifier; models/stories.lua expects a shared one" % path)
    if pos != data.size:
        sys.exit("convert_llama2c: %s: %d floats left over" % (path, data.size - pos))
    t = {"tok_embeddings.weight": emb, "norm.weight": rms_final, "rope.cos": cos, "rope.sin": sin}
    for i in range(layers):
        p = "layers.%d." % i
        t[p + "attention_norm.weight"] = rms_att[i]
        t[p + "attention.wq.weight"] = wq[i]
        t[p + "attention.wk.weight"] = wk[i]
        t[p + "attention.wv.weight"] = wv[i]
        t[p + "attention.wo.weight"] = wo[i]
        t[p + "ffn_norm.weight"] = rms_ffn[i]
        t[p + "feed_forward.w1.weight"] = w1[i]
        t[p + "feed_forward.w2.weight"] = w2[i]
        t[p + "feed_forward.w3.weight"] = w3[i]
    cfg = dict(dim=dim, hidden_dim=hidden, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads,
               vocab_size=vocab, seq_len=seq_len)
    return cfg, t


def check_rope(cos, sin, hd):
    """The file's tables are cos/sin(pos * 10000^(-2i/hd)) up to f32 rounding."""
    freqs = 1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    ang = np.arange(cos.shape[0], dtype=np.float64)[:, None] * freqs[None, :]
    err = max(float(np.max(np.abs(cos - np.cos(ang)))), float(np.max(np.abs(sin - np.sin(ang)))))
    if err > 1e-4:
        sys.exit("convert_llama2c: the RoPE tables differ from theta 10000 by %g" % err)
    return err


def write_safetensors(path, tensors, metadata):
    names = sorted(tensors)
    header, off = {"__metadata__": metadata}, 0
    for n in names:
        a = tensors[n]
        header[n] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":"), sort_keys=False).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n in names:
            f.write(np.ascontiguousarray(tensors[n], dtype="<f4").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", help="directory with stories260K.bin and tok512.bin")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "weights"))
    a = ap.parse_args()
    for name, want in SHA256.items():
        got = sha256(os.path.join(a.src, name))
        if got != want:
            sys.exit("convert_llama2c: %s has SHA-256 %s, expected %s" % (name, got, want))
    cfg, t = read_checkpoint(os.path.join(a.src, "stories260K.bin"))
    err = check_rope(t["rope.cos"], t["rope.sin"], cfg["dim"] // cfg["n_heads"])
    meta = {"model": "stories260K (llama2.c tinyllamas, Andrej Karpathy, MIT licence)",
            "source_sha256": SHA256["stories260K.bin"], "script": "scripts/convert_llama2c.py",
            "config": json.dumps(cfg, sort_keys=True)}
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, "stories260K.safetensors")
    write_safetensors(out, t, meta)
    shutil.copyfile(os.path.join(a.src, "tok512.bin"), os.path.join(a.out, "tok512.bin"))
    print("config %s; RoPE tables within %.1e of cos/sin; %d tensors" % (cfg, err, len(t)))
    for p in (out, os.path.join(a.out, "tok512.bin")):
        print("%s  %d bytes  sha256 %s" % (os.path.basename(p), os.path.getsize(p), sha256(p)))


if __name__ == "__main__":
    main()
