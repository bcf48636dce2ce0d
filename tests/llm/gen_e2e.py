"""gen_e2e.py -- t_llm: text generation end to end with a byte-level BPE vocabulary, through
scripts/llm_main.c (runtime/llm/kiln_generate.c over kiln_tok) on a model built from
models/llm.lua, against the PyTorch reference tests/llm/torch_llm.py.

The vocabulary is tests/llm/tokjson/llama3re.json (Qwen3's pieces under Llama-3's split
pattern and ignore_merges; README.md there) with its ids renumbered densely (0..N-1, the
pieces in their old order), so that a small model's logits cover it; merges are by text
and need no renumbering. The model is run_llm.py's "llama3" case (RoPE scaling "llama3",
GQA 4:1, untied head) with vocab_size N, seeded, built with `--tokenizer` (NAME.tok beside
the weights), max_context 64, prefill chunks of 5 (so prompts of 8 and 13 ids end in a
partial chunk); llm_main is compiled with ASan+UBSan.

  llm/generate-bpe/prompt   the prompt "año compiler<TAB>12345 she " encodes to
                            transformers.js' ids for that line of texts.txt (llama3re.ids,
                            renumbered); no BOS (the vocabulary has none)
  .../greedy                16 greedy ids equal float64 PyTorch's arg-max continuation
                            (the smallest top-1/top-2 logit gap is printed: a gap under
                            the logits' 1e-4 tolerance would make a tie legitimately flip)
  .../text                  the streamed text is the prompt and the ids' bytes decoded as
                            Python's lossy UTF-8 decoding does (GPT-2's byte alphabet
                            inverted here, not by Kiln)
  .../stop                  a stop string taken from that text: the output ends just before
                            it, the ids end with the token that completed it
  .../eos                   --eos naming the third greedy id: two ids generated
  .../penalties             greedy with repetition 0.5, presence -2, frequency 1 over
                            the last 6 ids equals the reference penalising its logits the
                            same way (and differs from plain greedy)
  .../sampled               seeded sampling (temperature, top-k, top-p, min-p) draws the ids
                            that PCG32 and the steps of docs/llm-runtime.md, written out
                            here in Python over the reference's logits, draw
  .../chat                  --chat qwen3: <|im_start|> and <|im_end|> are single ids, the
                            text between them as `kiln tokenize` encodes it; the greedy
                            continuation equals PyTorch's
  .../memory                --speed prints the generation buffers and the peak RSS
  .../threads-N             --threads 2 and 3 (the entries' _par functions on
                            runtime/kiln_pool.c) give the same ids and text
  .../prefill-last          a build with -D prefill_logits=last (the prefill returns the
                            one row generation samples from) gives the same ids and text,
                            at 1 and 2 threads, with 4 rows of logits fewer in its buffers

usage: /usr/bin/python3 tests/llm/gen_e2e.py WORKDIR
"""
import codecs
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
import kt  # noqa: E402
import run_llm  # noqa: E402
import torch_llm  # noqa: E402

S = "llm/generate-bpe"
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
PROMPT = "año compiler\t12345 she "
NGEN = 16


def dense_tokenizer(src, dst):
    """src's tokenizer.json with ids renumbered 0..N-1 in their old order, written to dst;
    returns ({old id: new id}, the json)."""
    j = json.load(open(src, encoding="utf-8"))
    old = sorted(set(j["model"]["vocab"].values()) | {a["id"] for a in j["added_tokens"]})
    new = {o: i for i, o in enumerate(old)}
    j["model"]["vocab"] = {k: new[v] for k, v in j["model"]["vocab"].items()}
    for a in j["added_tokens"]:
        a["id"] = new[a["id"]]
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    return new, j


def piece_bytes(j):
    """{id: bytes}: vocabulary pieces through GPT-2's byte alphabet inverted (printable
    Latin-1 bytes stand for themselves, the other bytes for U+0100 on, in byte order);
    added tokens are their literal text."""
    keep = list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    to_byte, extra = {}, 0
    for b in range(256):
        if b in keep:
            to_byte[chr(b)] = b
        else:
            to_byte[chr(256 + extra)] = b
            extra += 1
    out = {i: bytes(to_byte[c] for c in p) for p, i in j["model"]["vocab"].items()}
    out.update({a["id"]: a["content"].encode() for a in j["added_tokens"]})
    return out


def penalise(row, seq, rep, presence, frequency, last_n):
    """row with the penalties of the ids in the last last_n of seq (all: 0): Hugging Face's
    repetition penalty (CTRL: a positive logit divided by it, a negative one multiplied),
    then OpenAI's presence (once per seen id) and frequency (per occurrence) penalties."""
    row = row.copy()
    window = seq[-last_n:] if last_n else seq
    for t in set(window):
        row[t] = row[t] / rep if row[t] > 0 else row[t] * rep
        row[t] -= presence + frequency * window.count(t)
    return row


def greedy(cfg, W, prompt, n, pen=None):
    """n arg-max continuation ids of prompt under the float64 reference (penalised by
    pen = (repetition, presence, frequency, last_n) if given), and the smallest gap between
    the top two logits relative to the largest |logit| on the way."""
    seq, gap = list(prompt), float("inf")
    for _ in range(n):
        row = np.asarray(torch_llm.forward(cfg, W, seq)[-1], dtype=np.float64)
        if pen:
            row = penalise(row, seq, *pen)
        top = np.sort(row)[-2:]
        gap = min(gap, (top[1] - top[0]) / np.abs(row).max())
        seq.append(int(np.argmax(row)))
    return seq[len(prompt):], gap


class Pcg32:
    """PCG32 as kiln_sample.h documents it (O'Neill's pcg32_random_r, seeded as
    pcg32_srandom_r(seed, 54)), written here from that description."""
    M64 = (1 << 64) - 1

    def __init__(self, seed, seq=54):
        self.state, self.inc = 0, (seq << 1 | 1) & self.M64
        self.u32()
        self.state = (self.state + seed) & self.M64
        self.u32()

    def u32(self):
        old = self.state
        self.state = (old * 6364136223846793005 + self.inc) & self.M64
        xs, rot = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF, old >> 59
        return ((xs >> rot) | (xs << ((32 - rot) & 31))) & 0xFFFFFFFF

    def unit(self):
        return (self.u32() >> 8) / 16777216.0


def draw(row, temp, top_k, top_p, min_p, rng):
    """One draw as docs/llm-runtime.md specifies it: logits / temperature, sorted (ties by
    id), top-k, softmax, top-p and min-p cuts, renormalised, the first candidate whose
    cumulative probability exceeds u * total. Returns the id and how close u came to a
    boundary (relative to total): a draw that close could move with the C's float32."""
    lg = row / temp
    order = sorted(range(len(lg)), key=lambda t: (-lg[t], t))
    keep = top_k if 0 < top_k < len(lg) else len(lg)
    c = order[:keep]
    e = np.exp(lg[c] - lg[c[0]])
    p = e / e.sum()
    mass, cut = 0.0, keep
    for i in range(keep):
        if i > 0 and (p[i] < min_p * p[0] or mass >= top_p):
            cut = i
            break
        mass += p[i]
    total = p[:cut].sum()
    u = rng.unit() * total
    acc = np.cumsum(p[:cut])
    i = int(np.searchsorted(acc, u, side="right"))
    return c[min(i, cut - 1)], float(np.min(np.abs(acc - u)) / total)


def sampled(cfg, W, prompt, n, seed, temp, top_k, top_p, min_p):
    """n ids drawn with the float64 reference's logits; the closest any draw came to a
    boundary."""
    seq, rng, near = list(prompt), Pcg32(seed), float("inf")
    for _ in range(n):
        row = np.asarray(torch_llm.forward(cfg, W, seq)[-1], dtype=np.float64)
        t, d = draw(row, temp, top_k, top_p, min_p, rng)
        seq.append(t)
        near = min(near, d)
    return seq[len(prompt):], near


def run_main(exe, out, args):
    """llm_main's (status, printed text without its final newline, ids, whole stdout, stderr)."""
    rc, so, se = kt.run([exe, os.path.join(out, "llm.weights"), os.path.join(out, "llm.tok")] + args, timeout=600)
    at = so.rfind("\ntokens: ")
    if rc != 0 or at < 0:
        return rc, None, None, so, se
    ids = [int(x) for x in so[at + len("\ntokens: "):].split("\n")[0].split()]
    return rc, so[:at], ids, so, se


def stream_texts(pieces, ids):
    """The text after each id as a streaming decoder emits it (whole characters; lossy)."""
    dec, text, out = codecs.getincrementaldecoder("utf-8")("replace"), "", []
    for i in ids:
        text += dec.decode(pieces[i], final=False)
        out.append(text)
    return out


def build_main(work, ck, out, tokjson, extra):
    """Builds llm.lua over ck into out (with extra -D arguments) and llm_main for it;
    returns (the executable, None) or (None, why)."""
    rc, so, se = kt.run([kt.KILN, "build", run_llm.SCRIPT, "-o", out, "--name", "llm", "-D", "checkpoint=" + ck,
                         "-D", "max_context=64", "-D", "prefill=5", "--tokenizer", tokjson] + extra)
    if rc != 0:
        return None, kt.why(rc, se, so)
    exe = os.path.join(out, "llm_main")
    rt = os.path.join(kt.ROOT, "runtime")
    srcs = [os.path.join(rt, "llm", f) for f in sorted(os.listdir(os.path.join(rt, "llm"))) if f.endswith(".c")]
    # tiny task sizes (as t_isa's): this small model's products and row kernels are then cut
    # into many tasks, so that --threads really splits them
    rc, so, se = kt.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-D_POSIX_C_SOURCE=200809L",
                         "-DKILN_TASK_FMAS=64.0", "-DKILN_TASK_ELEMS=16.0"] + SAN +
                        ["-I" + out, "-I" + rt, "-I" + os.path.join(rt, "llm"), "-DKM=llm", "-DKMU=LLM",
                         '-DMODEL_HEADER="llm.h"', "-o", exe, os.path.join(kt.ROOT, "scripts", "llm_main.c"),
                         os.path.join(out, "llm.c"), os.path.join(rt, "kiln_runtime.c"), os.path.join(rt, "kiln_pool.c")] +
                        srcs + ["-pthread", "-lm"])
    return (exe, None) if rc == 0 else (None, kt.why(rc, se, so))


def buffers_kib(so):
    """The generation buffers' KiB in llm_main --speed's memory line, or None."""
    m = [l for l in so.splitlines() if l.startswith("memory: ")]
    return float(m[0].split()[1]) if m else None


def main():
    work = os.path.join(sys.argv[1], "gen_e2e")
    os.makedirs(work, exist_ok=True)
    D = os.path.join(HERE, "tokjson")
    tokjson = os.path.join(work, "tokenizer.json")
    remap, j = dense_tokenizer(os.path.join(D, "llama3re.json"), tokjson)
    pieces = piece_bytes(j)
    cfg = dict(run_llm.CASES["llama3"], vocab_size=len(remap))
    W = run_llm.checkpoint(cfg, seed=11)
    ck, out = os.path.join(work, "ckpt"), os.path.join(work, "out")
    run_llm.write_checkpoint(ck, cfg, W)
    exe, why = build_main(work, ck, out, tokjson, [])
    if why:
        return kt.report(False, S + "/build", why)

    texts = open(os.path.join(D, "texts.txt"), encoding="utf-8", newline="").read().split("\n")
    refs = open(os.path.join(D, "llama3re.ids")).read().split("\n")
    want_prompt = [remap[int(x)] for x in refs[texts.index(PROMPT)].split()]
    want, gap = greedy(cfg, W, want_prompt, NGEN)

    rc, text, ids, so, se = run_main(exe, out, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids", "--speed"])
    if ids is None:
        return kt.report(False, S + "/greedy", kt.why(rc, se, so))
    n = len(want_prompt)
    kt.report(ids[:n] == want_prompt, S + "/prompt", "%d ids, transformers.js' (renumbered)" % n if ids[:n] == want_prompt
              else "got %s, want %s" % (ids[:n], want_prompt))
    kt.report(ids[n:] == want, S + "/greedy", "%d ids equal PyTorch's; smallest top-2 gap %.1e of max |logit|" % (NGEN, gap)
              if ids[n:] == want else "got %s, want %s (smallest top-2 gap %.1e)" % (ids[n:], want, gap))
    full = stream_texts(pieces, want)
    flushed = codecs.decode(b"".join(pieces[i] for i in want), "utf-8", "replace")
    kt.report(text == PROMPT + flushed, S + "/text", "%r" % flushed[:60] if text == PROMPT + flushed
              else "got %r, want %r" % (text[len(PROMPT):][:80], flushed[:80]))
    mem = [l for l in so.splitlines() if l.startswith("memory: ")]
    kt.report(bool(mem) and "KiB of generation buffers" in mem[0] and "peak resident set" in mem[0], S + "/memory",
              mem[0] if mem else "no memory line: %r" % so[-200:])

    # --threads: every call through the entries' _par functions on runtime/kiln_pool.c; the
    # same ids and text at 2 and 3 threads (each output one task whatever the split)
    for th in (2, 3):
        rc, text_t, ids_t, so_t, se = run_main(exe, out, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids",
                                                         "--speed", "--threads", str(th)])
        ok = ids_t == ids and text_t == text and "prefill: " in so_t
        kt.report(ok, S + "/threads-%d" % th, "the same %d ids and text on %d threads" % (len(ids), th) if ok
                  else "got %s, want %s: %s" % (ids_t, ids, kt.why(rc, se, so_t)))

    # -D prefill_logits=last: the prefill returns the row generation samples from (the
    # prompt's 8 ids end in a partial chunk: row 2 of the second); the same greedy ids, and
    # a logits buffer of one row instead of 5
    out_l = os.path.join(work, "out_last")
    exe_l, why = build_main(work, ck, out_l, tokjson, ["-D", "prefill_logits=last"])
    if why:
        kt.report(False, S + "/prefill-last", why)
    else:
        rc, text_l, ids_l, so_l, se = run_main(exe_l, out_l, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids",
                                                           "--speed"])
        rc, text_l2, ids_l2, _, _ = run_main(exe_l, out_l, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids",
                                                           "--threads", "2"])
        ids_l = ids_l if ids_l2 == ids_l and text_l2 == text_l else None   # the _par prefill with `last` too
        kib, kib_l = buffers_kib(so), buffers_kib(so_l)
        saved = 4 * (5 - 1) * len(remap) / 1024.0
        ok = ids_l == ids and text_l == text and kib is not None and kib_l is not None and abs(kib - kib_l - saved) < 0.1
        kt.report(ok, S + "/prefill-last", "-D prefill_logits=last: the same %d ids and text; buffers %.1f KiB, "
                  "%.1f less (4 rows of logits)" % (len(ids), kib_l, saved) if ok else
                  "got %s (%s KiB), want %s (%s KiB less than %s)" % (ids_l, kib_l, ids, saved, kib))

    # a stop string: three characters of the text from the middle of it (no U+FFFD)
    gen = full[-1]
    start = next((p for p in range(len(gen) // 2, len(gen) - 3) if "\ufffd" not in gen[p:p + 3]), None)
    if start is None:
        kt.report(False, S + "/stop", "no stop string to take from %r" % gen)
    else:
        stop = gen[start:start + 3]
        cut = gen.index(stop)
        k = next(i for i, t in enumerate(full) if stop in t) + 1
        rc, text, ids, so, se = run_main(exe, out, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids", "--stop", stop])
        ok = ids is not None and text == PROMPT + gen[:cut] and ids[n:] == want[:k]
        kt.report(ok, S + "/stop", "stop %r: %d ids, the text up to it" % (stop, k) if ok
                  else "stop %r: got %r / %s, want %r / %s" % (stop, text and text[len(PROMPT):], ids and ids[n:],
                                                              gen[:cut], want[:k]))

    rc, text, ids, so, se = run_main(exe, out, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids",
                                                "--eos", str(want[2])])
    ok = ids is not None and ids[n:] == want[:2]
    kt.report(ok, S + "/eos", "" if ok else "got %s, want %s" % (ids and ids[n:], want[:2]))

    # greedy under repetition, presence and frequency penalties over the last 6 ids: the
    # reference applies them to its float64 logits. A repetition penalty below 1 and a
    # negative presence penalty favour the seen ids (this random model does not repeat
    # itself), the frequency penalty holds them back again: the ids must change.
    pen = (0.5, -2.0, 1.0, 6)
    want_p, gap_p = greedy(cfg, W, want_prompt, NGEN, pen)
    rc, text, ids, so, se = run_main(exe, out, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids", "--repeat-penalty",
                                                "0.5", "--presence-penalty", "-2", "--frequency-penalty", "1",
                                                "--penalty-last-n", "6"])
    ok = ids is not None and ids[n:] == want_p and want_p != want
    kt.report(ok, S + "/penalties", "%d ids equal the penalised reference's, not the plain greedy ones (gap %.1e)" %
              (NGEN, gap_p) if ok else "got %s, want %s (plain greedy %s)" % (ids and ids[n:], want_p, want))

    # seeded sampling: the documented generator and steps, implemented here, draw the ids
    want_s, near = sampled(cfg, W, want_prompt, NGEN, 1234, 0.9, 50, 0.95, 0.02)
    rc, text, ids, so, se = run_main(exe, out, ["--prompt", PROMPT, "--max-tokens", str(NGEN), "--ids", "--temperature",
                                                "0.9", "--top-k", "50", "--top-p", "0.95", "--min-p", "0.02",
                                                "--seed", "1234"])
    ok = ids is not None and ids[n:] == want_s and want_s != want
    kt.report(ok, S + "/sampled", "seed 1234, temperature 0.9, top-k 50, top-p 0.95, min-p 0.02: %d ids equal the "
              "reference's draws (closest draw %.1e of the mass from a boundary)" % (NGEN, near) if ok
              else "got %s, want %s (closest draw %.1e)" % (ids and ids[n:], want_s, near))

    # the Qwen3 chat template through the same tokenizer: <|im_start|> and <|im_end|> are
    # single ids where the template put them, the ids spell the template's text exactly
    ims, ime = remap[151644], remap[151645]
    chat = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    rc, text, ids, so, se = run_main(exe, out, ["--chat", "qwen3", "--prompt", "Hi there", "--max-tokens", "6", "--ids"])
    if ids is None:
        return kt.report(False, S + "/chat", kt.why(rc, se, so))
    m = next((i for i in range(len(ids) + 1) if b"".join(pieces[x] for x in ids[:i]) == chat.encode()), None)
    specials = m is not None and [i for i, x in enumerate(ids[:m]) if x in (ims, ime)] == \
        [0, ids[:m].index(ime), len(ids[:m]) - 1 - ids[:m][::-1].index(ims)] and ids[:m].count(ims) == 2
    want_c, gap_c = greedy(cfg, W, ids[:m], 6) if m is not None else ([], 0)
    ok = specials and ids[m:] == want_c and text.startswith(chat)
    kt.report(ok, S + "/chat", "%d prompt ids spelling the template, specials single ids; 6 greedy ids equal PyTorch's "
              "(gap %.1e)" % (m, gap_c) if ok else "ids %s (template ends after %s ids), want the continuation %s" %
              (ids, m, want_c))


if __name__ == "__main__":
    main()
