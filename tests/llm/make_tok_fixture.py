"""make_tok_fixture.py -- writes tests/llm/tok512_texts.txt, the texts of the tokenizer
parity check (208 lines, seeded: TinyStories-like sentences, accents, CJK, emoji, tabs and
space runs, digits, code, special-looking strings, random code points). Their reference ids,
tests/llm/tok512_ids.txt, come from llama.cpp's own tokenizer, run once by hand on the
stories260K GGUF that bench/llamacpp writes (same vocabulary as models/weights/tok512.bin):

  /usr/bin/python3 tests/llm/make_tok_fixture.py
  BENCH=llamacpp make bench        # installs node-llama-cpp, writes .cache/bench/llamacpp/work/kiln_F32/stories.gguf
  cd .cache/bench/llamacpp && cp ../../../bench/llamacpp/tokenize.mjs . && \\
    node tokenize.mjs work/kiln_F32/stories.gguf ../../../tests/llm/tok512_texts.txt > ../../../tests/llm/tok512_ids.txt

(node-llama-cpp 3.22.1, 2026-11-25.) make test never needs node: the ids are the fixture.
"""
import os
import random

random.seed(2026)
words = ("once upon a time there was little girl named Lily she loved to play outside in the park one day saw big "
         "red ball").split()
lines = []
for i in range(120):
    n = random.randint(1, 14)
    s = " ".join(random.choice(words) for _ in range(n))
    if random.random() < 0.5:
        s = s.capitalize()
    if random.random() < 0.4:
        s += random.choice([".", "!", "?", ",", "\"", "'s"])
    lines.append(s)
lines += ["café naïve résumé Ærøskøbing", "Straße über Größe", "日本語のテキスト", "中文测试", "한국어",
          "emoji 😀🎉👍 done", "tabs\tand\tspaces", "multiple   spaces    here", " leading space", "trailing space ",
          "digits 0123456789 3.14159 1e-5", "int main(void) { return 0; }", "for i in range(10): print(i ** 2)",
          "x = {\"key\": [1, 2, 3]}", "Ω≈ç√∫˜µ≤≥÷", "ümlaut Ünïcödé", "a", "A", "   ", "\u00a0nbsp", "mixed日本english",
          "<s> </s> <unk>", "<0x41>", "Hello, World!", "It's a dog's life.", "e-mail: someone@example.com",
          "https://example.org/path?q=1&r=2", "Once upon a time, there was a little girl named Lily."]
for i in range(60):
    s = "".join(chr(random.choice([random.randint(32, 126), random.randint(0xa0, 0x24f), random.randint(0x3040, 0x30ff),
                                   random.randint(0x4e00, 0x4e80), random.randint(0x1f600, 0x1f64f)]))
                for _ in range(random.randint(1, 20)))
    lines.append(s)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tok512_texts.txt")
open(out, "w", encoding="utf-8").write("\n".join(lines) + "\n")
