"""run_llm.py -- t_llm: models/llm.lua (Llama 2/3.x, Qwen2, Qwen3, Gemma 3 from a Hugging
Face checkpoint directory) against tests/llm/torch_llm.py and tests/llm/torch_gemma.py,
independent float64 PyTorch implementations of those architectures.

For each family a small seeded checkpoint is written here as Hugging Face publishes them
(config.json; model.safetensors, or two shards and model.safetensors.index.json):
  llm/<case>/c        the generated C (-O1, ASan+UBSan): a prefill of 8 tokens at position
                      0, then 8 decodes at positions 8..15, the state carried between calls:
                      all 16 logits rows equal the reference's full causal forward within
                      1e-4 of the largest |logit| (docs/testing.md: whole-model tolerance)
  llm/<case>/interp   the reference interpreter on the same prefill and first decode: equal
                      to the C within the same tolerance
  llm/<case>/last_row  (llama3, gemma3) a build with -D prefill_logits=last: its prefill's
                      one row of logits, `last` = r, is row r of the default build's bit
                      for bit (r outside the chunk: the nearest row)
  llm/<gemma>/window_only  the last decode again from its state with every slot of the
                      sliding layers' rings outside the decode's window NaN: the same
                      logits bit for bit (the C reads O(window) slots per decode)
Cases: llama2 (tied head, GQA 4:2), llama3 (rope_scaling "llama3", theta 5e5, untied,
sharded, GQA 4:1), qwen2 (q/k/v bias, 3 heads), qwen3 (q/k RMSNorm, head_dim 24 with
hidden 64), gemma3 (gemma3_text: window 4, sliding_window_pattern 2, query_pre_attn_scalar
24, rope_parameters) and gemma3mm (a gemma3 multimodal config, see CASES). The Gemma cases run a prefill of
8 at 0, another at 8 (the rings of 4 + 8 - 1 = 11 slots wrap inside it), then 8 decodes
to position 23; the interpreter the first three calls. And errors, one line naming the
file and field: an unsupported hidden_act, an unsupported rope_scaling type, a missing
required field, a shard the index names but the directory lacks; for Gemma
attn_logit_softcapping, hidden_activation, rope_scaling, layer_types,
use_bidirectional_attention, a text_config field, a missing text_config, a text tensor
missing from or extra to a multimodal checkpoint.

usage: /usr/bin/python3 tests/llm/run_llm.py WORKDIR
       /usr/bin/python3 tests/llm/run_llm.py --checkpoint CASE DIR   (writes CASE's checkpoint
       into DIR and prints the -D arguments of a build over it: t_metal's gemma model)
"""
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
import kt  # noqa: E402
import torch_gemma  # noqa: E402
import torch_llm  # noqa: E402

S = "llm"
SCRIPT = os.path.join(kt.ROOT, "models", "llm.lua")
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
CTX, PREFILL, NDEC = 24, 8, 8
TOL = 1e-4

CASES = {
    "llama2": dict(model_type="llama", hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, vocab_size=128, rms_norm_eps=1e-5,
                   rope_theta=10000.0, tie_word_embeddings=True, max_position_embeddings=4096,
                   hidden_act="silu", torch_dtype="float32"),
    "llama3": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=1, vocab_size=160, rms_norm_eps=1e-5,
                   rope_theta=500000.0, tie_word_embeddings=False, max_position_embeddings=131072,
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=16)),
    "qwen2": dict(model_type="qwen2", hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                  num_attention_heads=3, num_key_value_heads=1, vocab_size=100, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False),
    "qwen3": dict(model_type="qwen3", hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=120, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, tie_word_embeddings=False),
    # Sliding layers 0 and 2 (pattern 2) with a window of 4, global 1 and 3; the scale from
    # query_pre_attn_scalar 24, not head_dim 16; RoPE from rope_parameters (newer configs),
    # linear factor 2 on the global layers.
    "gemma3": dict(model_type="gemma3_text", hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128, rms_norm_eps=1e-6,
                   rope_parameters=dict(sliding_attention=dict(rope_type="default", rope_theta=10000.0),
                                        full_attention=dict(rope_type="linear", factor=2.0, rope_theta=1000000.0)),
                   sliding_window=4, sliding_window_pattern=2,
                   query_pre_attn_scalar=24, hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
                   attn_logit_softcapping=None, rope_scaling=None, tie_word_embeddings=True,
                   max_position_embeddings=32768, torch_dtype="bfloat16"),
    # The multimodal layout: text_config with Gemma3TextConfig's defaults left out
    # (rms_norm_eps, rope_theta, rope_local_base_freq, query_pre_attn_scalar 256), explicit
    # layer_types, window 5, linear rope_scaling, final soft-capping 30; head_dim 32 with
    # hidden 48 and 3 heads (GQA 3:1); tensors under language_model., a vision tower beside
    # them; two shards.
    "gemma3mm": dict(model_type="gemma3", text_config=dict(
        model_type="gemma3_text", hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=3,
        num_key_value_heads=1, head_dim=32, vocab_size=140, sliding_window=5,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_scaling=dict(rope_type="linear", factor=8.0), final_logit_softcapping=30.0),
        vision_config=dict(hidden_size=8), mm_tokens_per_image=4),
}
# Gemma3TextConfig's defaults for the fields the cases leave out (the reference reads them).
GEMMA_DEFAULTS = dict(rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0, query_pre_attn_scalar=256)


def text_config(cfg):
    """The text model's config: cfg itself, or a gemma3 config's text_config with the
    defaults filled in."""
    if cfg["model_type"] == "gemma3":
        return dict(GEMMA_DEFAULTS, **cfg["text_config"])
    return dict(GEMMA_DEFAULTS, **cfg) if cfg["model_type"] == "gemma3_text" else cfg


def gemma_checkpoint(cfg, seed):
    """{name: f32 array} of a seeded Gemma 3 checkpoint for cfg (gemma3_text or gemma3),
    under Hugging Face's names. Norm weights are offsets from 1 (Gemma scales by 1 + w)."""
    rng = np.random.default_rng(seed)
    c = text_config(cfg)
    D, H, V, F, HD = c["hidden_size"], c["num_attention_heads"], c["vocab_size"], c["intermediate_size"], c["head_dim"]
    KV = c["num_key_value_heads"]

    def mat(o, i):
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    def norm(n):
        return (0.2 * rng.standard_normal(n)).astype(np.float32)
    W = {"model.embed_tokens.weight": (0.3 * rng.standard_normal((V, D))).astype(np.float32), "model.norm.weight": norm(D)}
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        for n in ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"]:
            W[p + n + ".weight"] = norm(D)
        W[p + "self_attn.q_norm.weight"] = norm(HD)
        W[p + "self_attn.k_norm.weight"] = norm(HD)
        for n, o in [("q", H * HD), ("k", KV * HD), ("v", KV * HD)]:
            W[p + "self_attn.%s_proj.weight" % n] = mat(o, D)
        W[p + "self_attn.o_proj.weight"] = mat(D, H * HD)
        W[p + "mlp.gate_proj.weight"] = mat(F, D)
        W[p + "mlp.up_proj.weight"] = mat(F, D)
        W[p + "mlp.down_proj.weight"] = mat(D, F)
    return W


def file_tensors(cfg, W):
    """The checkpoint's tensors as the file names them: a gemma3 file puts the text model
    under language_model. beside a vision tower and projector (which llm.lua leaves unused)."""
    if cfg["model_type"] != "gemma3":
        return W
    out = {"language_model." + n: a for n, a in W.items()}
    out["vision_tower.vision_model.embeddings.patch_embedding.weight"] = np.ones((8, 3, 2, 2), np.float32)
    out["multi_modal_projector.mm_input_projection_weight"] = np.ones((8, 48), np.float32)
    return out


def reference(cfg, W, tokens):
    """The independent reference's logits for cfg's family."""
    if cfg["model_type"].startswith("gemma3"):
        return torch_gemma.forward(text_config(cfg), W, tokens)
    return torch_llm.forward(cfg, W, tokens)


def checkpoint(cfg, seed):
    """{name: f32 array} of a seeded checkpoint for cfg, under Hugging Face's names."""
    if cfg["model_type"].startswith("gemma3"):
        return gemma_checkpoint(cfg, seed)
    rng = np.random.default_rng(seed)
    D, H, V, F = cfg["hidden_size"], cfg["num_attention_heads"], cfg["vocab_size"], cfg["intermediate_size"]
    KV = cfg.get("num_key_value_heads", H)
    HD = cfg.get("head_dim", D // H)
    bias = cfg["model_type"] == "qwen2"

    def mat(o, i):
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    W = {"model.embed_tokens.weight": rng.standard_normal((V, D)).astype(np.float32), "model.norm.weight": norm(D)}
    if not cfg.get("tie_word_embeddings", False):
        W["lm_head.weight"] = mat(V, D)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        W[p + "input_layernorm.weight"] = norm(D)
        W[p + "post_attention_layernorm.weight"] = norm(D)
        for n, o in [("q", H * HD), ("k", KV * HD), ("v", KV * HD)]:
            W[p + "self_attn.%s_proj.weight" % n] = mat(o, D)
            if bias:
                W[p + "self_attn.%s_proj.bias" % n] = (0.1 * rng.standard_normal(o)).astype(np.float32)
        W[p + "self_attn.o_proj.weight"] = mat(D, H * HD)
        if cfg["model_type"] == "qwen3":
            W[p + "self_attn.q_norm.weight"] = norm(HD)
            W[p + "self_attn.k_norm.weight"] = norm(HD)
        W[p + "mlp.gate_proj.weight"] = mat(F, D)
        W[p + "mlp.up_proj.weight"] = mat(F, D)
        W[p + "mlp.down_proj.weight"] = mat(D, F)
    return W


def write_checkpoint(d, cfg, W, shards=1):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    names = sorted(W)
    if shards == 1:
        kt.write_safetensors(os.path.join(d, "model.safetensors"), {n: W[n] for n in names})
        return
    weight_map = {}
    for s in range(shards):
        file = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = names[s::shards]
        kt.write_safetensors(os.path.join(d, file), {n: W[n] for n in part})
        weight_map.update({n: file for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def close(got, ref):
    err = float(np.abs(got.astype(np.float64) - ref).max())
    bound = TOL * float(np.abs(ref).max())
    return err <= bound, "max |difference| %.2e, bound %.2e" % (err, bound)


# The calls of a case, (entry, first position, tokens): a prefill then decodes; Gemma a
# second prefill too (its ring of 4 + 8 - 1 = 11 slots wraps inside that chunk) and
# decodes to position 23, far past the window.
PLAN = [("prefill", 0, PREFILL)] + [("decode", PREFILL + i, 1) for i in range(NDEC)]
GEMMA_PLAN = [("prefill", 0, PREFILL), ("prefill", PREFILL, PREFILL)] + [("decode", 2 * PREFILL + i, 1) for i in range(NDEC)]


def window_only(out, meta, entry, window, pos, tokens, before, logits, name):
    """llm/<gemma case>/window_only: the last decode again, from its state with every slot
    of the sliding layers' rings outside that decode's window set to NaN: the same logits
    bit for bit, so the C reads only the window's slots (O(window) per decode, not the ring
    or the context)."""
    block = bytearray(before)
    for s in meta["states"]:
        kv, slots, hd = s["shape"]
        if slots == CTX:
            continue                                   # a global layer's cache
        a = np.frombuffer(block, np.float32, kv * slots * hd, s["offset"]).reshape(kv, slots, hd).copy()
        keep = [p % slots for p in range(pos - window + 1, pos + 1)]
        a[:, [j for j in range(slots) if j not in keep], :] = np.nan
        block[s["offset"]:s["offset"] + a.nbytes] = a.tobytes()
    st, why, res, _ = kt.run_entry(out, "llm", entry, [tokens[pos:pos + 1], np.int32(pos)], state_in=bytes(block),
                                   exe="run_decode", tag="nan")
    ok = st == "ok" and np.array_equal(res[0].view(np.uint32), logits.view(np.uint32))
    kt.report(ok, "%s/%s/window_only" % (S, name), "decode at %d, ring slots outside its window NaN: the same logits" % pos
              if ok else why or "the logits changed")


def run_case(work, name, cfg):
    ck = os.path.join(work, "ckpt_" + name)
    W = checkpoint(cfg, seed=len(name))
    write_checkpoint(ck, cfg, file_tensors(cfg, W), shards=2 if name in ("llama3", "gemma3mm") else 1)
    plan = GEMMA_PLAN if name.startswith("gemma") else PLAN
    total = plan[-1][1] + plan[-1][2]
    out = os.path.join(work, "out_" + name)
    rc, so, se = kt.run([kt.KILN, "build", SCRIPT, "-o", out, "--name", "llm", "-D", "checkpoint=" + ck,
                         "-D", "max_context=%d" % CTX, "-D", "prefill=%d" % PREFILL])
    if rc != 0:
        return kt.report(False, "%s/%s/c" % (S, name), "build: " + kt.why(rc, se, so))
    meta = kt.load_meta(out, "llm")
    tokens = np.random.default_rng(99).integers(0, text_config(cfg)["vocab_size"], total).astype(np.int32)
    ref = reference(cfg, W, tokens.tolist())
    ents = {e: kt.entry_of(meta, e) for e in ("prefill", "decode")}
    for e, rec in ents.items():
        ok, why = kt.compile_driver(out, "llm", meta, flags=SAN, exe="run_" + e, entry=rec)
        if not ok:
            return kt.report(False, "%s/%s/c" % (S, name), why)
    rows, state = [], None
    for e, pos, n in plan:
        before = state
        st, why, res, state = kt.run_entry(out, "llm", ents[e], [tokens[pos:pos + n], np.int32(pos)], state_in=state,
                                           exe="run_" + e)
        if st != "ok":
            return kt.report(False, "%s/%s/c" % (S, name), why)
        rows.append(res[0])
    c = np.concatenate(rows)
    ok, detail = close(c, ref)
    kt.report(ok, "%s/%s/c" % (S, name), detail)
    if name in LAST_ROW_CASES:
        last_row(work, name, ck, tokens[:PREFILL], c[:PREFILL])
    if name.startswith("gemma"):
        window_only(out, meta, ents["decode"], text_config(cfg)["sliding_window"], plan[-1][1], tokens, before, res[0], name)

    # The interpreter, with the build's -D options (kt.kiln_run_entry passes none).
    sd = os.path.join(work, "interp_" + name)
    got = []
    state_path = None
    steps = plan[:[e for e, _, _ in plan].index("decode") + 1]          # up to the first decode
    for e, pos, n in steps:
        toks = tokens[pos:pos + n]
        d = os.path.join(sd, "%s_%d" % (e, pos))
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "t.npy"), toks)
        np.save(os.path.join(d, "p.npy"), np.int32(pos))
        tname = "tokens" if e == "prefill" else "token"
        args = [kt.KILN, "run", SCRIPT, "--entry", e, "-D", "checkpoint=" + ck, "-D", "max_context=%d" % CTX,
                "-D", "prefill=%d" % PREFILL, "--input", "%s=%s" % (tname, os.path.join(d, "t.npy")),
                "--input", "pos=" + os.path.join(d, "p.npy"), "--state-out", os.path.join(d, "state.bin"),
                "--save", d, "--limit", "1"]
        if state_path:
            args += ["--state-in", state_path]
        rc, so, se = kt.run(args)
        if rc != 0:
            return kt.report(False, "%s/%s/interp" % (S, name), kt.why(rc, se, so))
        state_path = os.path.join(d, "state.bin")
        got.append(np.load(os.path.join(d, "logits.npy")))
    ok, detail = close(np.concatenate(got), c[:steps[-1][1] + 1].astype(np.float64))
    kt.report(ok, "%s/%s/interp" % (S, name), detail + " (against the C)")


# -D prefill_logits=last on an untied head and on Gemma's soft-capped tied one.
LAST_ROW_CASES = ("llama3", "gemma3")


def last_row(work, name, ck, tokens, rows):
    """llm/<case>/last_row: a build with -D prefill_logits=last; its prefill at position 0
    with `last` = r returns row r of the default build's prefill logits (rows) bit for bit
    (the classifier's one-row sums are the same fmaf chains); r past either end reads the
    nearest row (kiln.gather's clamp). Its header's logits are one row."""
    out = os.path.join(work, "out_%s_last" % name)
    rc, so, se = kt.run([kt.KILN, "build", SCRIPT, "-o", out, "--name", "llm", "-D", "checkpoint=" + ck,
                         "-D", "max_context=%d" % CTX, "-D", "prefill=%d" % PREFILL, "-D", "prefill_logits=last"])
    if rc != 0:
        return kt.report(False, "%s/%s/last_row" % (S, name), "build: " + kt.why(rc, se, so))
    meta = kt.load_meta(out, "llm")
    rec = kt.entry_of(meta, "prefill")
    ok, why = kt.compile_driver(out, "llm", meta, flags=SAN, exe="run_last", entry=rec)
    if not ok:
        return kt.report(False, "%s/%s/last_row" % (S, name), why)
    bad = []
    for r in (0, 3, PREFILL - 1, PREFILL + 5, -2):
        st, why, res, _ = kt.run_entry(out, "llm", rec, [tokens, np.int32(0), np.int32(r)], exe="run_last")
        if st != "ok":
            return kt.report(False, "%s/%s/last_row" % (S, name), "last=%d: %s" % (r, why))
        want = rows[min(max(r, 0), PREFILL - 1)]
        if res[0].shape != (1, rows.shape[1]) or res[0].tobytes() != want.tobytes():
            bad.append("last=%d: shape %s, max |diff| %.2e" % (r, res[0].shape, float(np.max(np.abs(res[0].reshape(-1)[:want.size] - want)))))
    kt.report(not bad, "%s/%s/last_row" % (S, name), "; ".join(bad) if bad else
              "-D prefill_logits=last: rows 0, 3, %d of the default build's prefill, bit for bit; %d and -2 clamped" %
              (PREFILL - 1, PREFILL + 5))


def check_errors(work):
    base = dict(CASES["llama2"])
    gem, mm = dict(CASES["gemma3"]), CASES["gemma3mm"]
    mm_text = mm["text_config"]
    cases = [
        ("hidden_act", dict(base, hidden_act="gelu"), None,
         ': hidden_act "gelu" (silu) is not supported by llm.lua'),
        ("rope_scaling", dict(base, rope_scaling=dict(rope_type="yarn", factor=4.0)), None,
         ': rope_scaling type "yarn" (llama3, or none) is not supported by llm.lua'),
        ("missing_field", {k: v for k, v in base.items() if k != "rms_norm_eps"}, None,
         ": field rms_norm_eps is missing"),
        ("missing_shard", base, "drop", "model-00002-of-00002.safetensors: cannot open: No such file or directory"),
        ("gemma_attn_softcap", dict(gem, attn_logit_softcapping=50.0), None,
         ": attn_logit_softcapping 50.0 (null: sdpa has no soft-capping) is not supported by llm.lua"),
        ("gemma_activation", dict(gem, hidden_activation="gelu"), None,
         ': hidden_activation "gelu" (gelu_pytorch_tanh) is not supported by llm.lua'),
        # the older spelling: rope_scaling is read only without rope_parameters
        ("gemma_rope_scaling", dict({k: v for k, v in gem.items() if k != "rope_parameters"},
                                    rope_scaling=dict(rope_type="yarn", factor=4.0)), None,
         ': rope_scaling type "yarn" (linear, or none) is not supported by llm.lua'),
        ("gemma_layer_types", dict(gem, layer_types=["sliding_attention", "chunked_attention", "full_attention",
                                                     "full_attention"]), None,
         ': layer_types entry "chunked_attention" (sliding_attention, full_attention) is not supported by llm.lua'),
        ("gemma_bidirectional", dict(gem, use_bidirectional_attention=True), None,
         ": use_bidirectional_attention true is not supported by llm.lua"),
        ("gemma_mm_field", dict(mm, text_config=dict(mm_text, attn_logit_softcapping=20.0)), None,
         ": text_config.attn_logit_softcapping 20.0 (null: sdpa has no soft-capping) is not supported by llm.lua"),
        ("gemma_mm_no_text", {k: v for k, v in mm.items() if k != "text_config"}, None,
         ": field text_config is missing (model_type gemma3)"),
        ("gemma_mm_missing", mm, "drop_tensor", ": the checkpoint has no tensor language_model.model.layers.1.mlp.up_proj.weight"),
        ("gemma_mm_extra", mm, "extra_tensor",
         "model.safetensors: tensor language_model.model.layers.0.self_attn.rotary.weight is not used by llm.lua (gemma3)"),
    ]
    for tag, cfg, how, want in cases:
        d = os.path.join(work, "err_" + tag)
        src = mm if cfg["model_type"] == "gemma3" else cfg           # weights shaped as the config (mm's without one)
        W = file_tensors(src, checkpoint(src, seed=1))
        if how == "drop_tensor":
            del W["language_model.model.layers.1.mlp.up_proj.weight"]
        if how == "extra_tensor":
            W["language_model.model.layers.0.self_attn.rotary.weight"] = np.ones(4, np.float32)
        write_checkpoint(d, cfg, W, shards=2 if how == "drop" else 1)
        if how == "drop":
            os.remove(os.path.join(d, "model-00002-of-00002.safetensors"))
        rc, so, se = kt.run([kt.KILN, "build", SCRIPT, "-o", os.path.join(work, "never_" + tag), "-D", "checkpoint=" + d])
        lines = se.strip().splitlines()
        ok = (rc == 1 and len(lines) == 1 and lines[0].startswith("llm.lua:") and want in lines[0] and
              not os.path.exists(os.path.join(work, "never_" + tag)))
        kt.report(ok, "%s/error/%s" % (S, tag), se.strip()[:300])


def write_case(name, d):
    """The seeded checkpoint of case `name` into directory d, as run_case writes it (the
    Metal and Core ML tests build models/llm.lua on it); returns the -D arguments of a
    build over it (max_context CTX, prefill PREFILL)."""
    cfg = CASES[name]
    write_checkpoint(d, cfg, file_tensors(cfg, checkpoint(cfg, seed=len(name))), shards=2 if name in ("llama3", "gemma3mm") else 1)
    return ["-D", "checkpoint=" + d, "-D", "max_context=%d" % CTX, "-D", "prefill=%d" % PREFILL]


def main():
    if sys.argv[1] == "--checkpoint":       # run_llm.py --checkpoint CASE DIR: print the build's -D arguments
        print(" ".join(write_case(sys.argv[2], sys.argv[3])))
        return
    work = sys.argv[1]
    kt.pmap(lambda kv: run_case(work, *kv), list(CASES.items()), jobs=2)
    check_errors(work)


if __name__ == "__main__":
    main()
