"""llamacpp_vocab.py KILN DIR -- llama.cpp's tokenizer-test vocabularies (tests/gguf/vocab/,
see its README.md) through `kiln tokenize FILE --null`: for every DIR/*.gguf with .inp and
.out beside it, the texts of .inp (separated by "\\n__ggml_vocab_test__\\n", as llama.cpp's
test-tokenizer-0 splits them) must give exactly the ids of .out (one line per text, no BOS).
Prints one PASS or FAIL line per vocabulary, with the first differing texts on FAIL."""
import glob
import os
import subprocess
import sys

SEP = b"\n__ggml_vocab_test__\n"


def texts(path):
    """The texts of a .inp file, split as test-tokenizer-0.cpp splits them."""
    raw, out, pos = open(path, "rb").read(), [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            out.append(raw[pos:])
            break
        out.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    return out


def main():
    kiln, d = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(d, "*.gguf")))
    if not files:
        print("FAIL tok/llamacpp-vocab: no GGUF files in %s" % d)
    for g in files:
        name = "tok/llamacpp-" + os.path.basename(g)[len("ggml-vocab-"):-len(".gguf")]
        ts = texts(g + ".inp")
        want = open(g + ".out", encoding="utf-8").read().split("\n")
        if want and want[-1] == "":
            want.pop()
        if len(want) != len(ts):
            print("FAIL %s: %d texts but %d lines of ids" % (name, len(ts), len(want)))
            continue
        p = subprocess.run([kiln, "tokenize", g, "--null"], input=b"\0".join(ts) + b"\0", capture_output=True)
        got = p.stdout.decode("utf-8", "replace").split("\n")[:-1]
        if p.returncode != 0 or len(got) != len(ts):
            print("FAIL %s: exit %d, %d lines for %d texts: %s" % (name, p.returncode, len(got), len(ts),
                                                                  p.stderr.decode("utf-8", "replace").strip()[:300]))
            continue
        bad = [(t, w, o) for t, w, o in zip(ts, want, got) if w.split() != o.split()]
        if bad:
            t, w, o = bad[0]
            print("FAIL %s: %d of %d texts differ; first %r: llama.cpp [%s], Kiln [%s]" % (
                name, len(bad), len(ts), t[:60], w.strip()[:120], o[:120]))
        else:
            print("PASS %s (%d texts, %d ids equal llama.cpp's)" % (name, len(ts), sum(len(w.split()) for w in want)))


if __name__ == "__main__":
    main()
