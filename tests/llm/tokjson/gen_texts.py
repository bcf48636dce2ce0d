#!/usr/bin/env python3
"""gen_texts.py — the parity texts for the tokenizer.json tokenizers (tests/llm/tokjson/):
N lines (default 3000) of varied text, deterministic for a seed; all but the last 40 in
NFC, those 40 deliberately not (Qwen's normalizer is NFC). No line holds a newline, U+0085 or U+FEFF
(the reference, transformers.js, spells \\s as JavaScript does, which differs from the
White_Space property exactly there), nor a CJK ideograph beyond U+FFFF (transformers.js'
BERT normalizer looks at UTF-16 code units and so does not split those, unlike Hugging
Face's tokenizers and Kiln).

  python3 tests/llm/tokjson/gen_texts.py [N] [SEED] > texts.txt
"""
import random
import sys
import unicodedata

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 11)

ENGLISH = ("the quick brown fox jumps over lazy dog once upon a time there was little girl named Lily she "
           "loved to play outside in park with her friends model compiler runtime token tensor kernel "
           "weights memory cache layer attention sampling temperature prompt generation").split()
CONTRACTIONS = ["don't", "it's", "I'LL", "we've", "they're", "she'd", "I'm", "can't", "won't", "Y'ALL",
                "rock'n'roll", "'s", "'t", "O'Neil", "isn’t"]
ACCENTED = ("café naïve résumé façade über straße Müller Ærøskøbing São Paulo año niño jalapeño Kraków "
            "żółć Tiếng Việt Đà Nẵng İstanbul ğüşöç Þórður Ísland crème brûlée Dvořák señor Zürich "
            "fiancée coöperate ÉCOLE Œuvre").split()
SCRIPTS = ["Καλημέρα κόσμε", "Привет, мир!", "Съешь же ещё этих мягких французских булок",
           "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "हिन्दी भाषा", "สวัสดีชาวโลก",
           "Բարեւ աշխարհ", "გამარჯობა", "ሰላም ልዑል", "ᚠᛇᚻ᛫ᛒᛦᚦ", "Ελληνικά ΑΒΓΔ"]
CJK = ["你好，世界！", "今天天气很好。", "机器学习模型编译器", "中华人民共和国", "東京タワーへ行きます。",
       "ひらがなとカタカナ", "ｶﾀｶﾅ半角", "日本語のテキスト、句読点。", "안녕하세요 세계", "한국어 문장입니다.",
       "「引用」と『二重』", "漢字𐌰𐌱𝔄𝔟", "（全角括弧）", "１２３４５６"]
EMOJI = ["🤖", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "1️⃣", "🏳️‍🌈", "🦀", "✨", "🎉🎉🎉", "☃", "⌘"]
SPACES = [" ", "  ", "   ", "    ", "\t", "\t\t", " \t ", "\r", " \r ", "\u00a0", "\u3000", "\u2003", "\u2009",
          "        ", "\u202f"]
NUMBERS = ["0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "-17", "1,000,000", "2024-11-26",
           "+1 (555) 010-9999", "0x7fffffff", "1e-5", "٣٤٥", "१२३", "²", "½", "Ⅻ", "①②", "99%", "$4.99", "€12,50"]
CODE = ["def f(x):\treturn x**2 + 1", "for (int i = 0; i < n; i++) { a[i] += b[i]; }",
        "const y = arr.map((v) => v * 2);", '{"key": [1, 2.5, null], "ok": true}', "if x != None and y >= 3:",
        "#include <stdio.h>", "SELECT * FROM t WHERE id = 42;", "<div class=\"a\">Hi</div>",
        "ls -la | grep '.c$' && make -j2", "x = re.compile(r'\\s+(?!\\S)')", "    return self._cache[key]",
        "fn main() -> Result<(), Box<dyn Error>> {", "a&&b||!c", "i++; j--; k <<= 2;", "@decorator", "`backticks`",
        "~/.config/kiln.json", "https://example.com/path?q=1&r=two#frag", "user@example.org"]
PUNCT = [".", ",", "!", "?", "...", "—", "–", "-", "(", ")", "[", "]", "\"", "'", "«", "»", "“", "”", "‘", "’",
         ":", ";", "/", "\\", "*", "#", "@", "&", "%", "^", "~", "|", "<", ">", "=", "+", "_", "§", "¶", "•", "…"]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<s>", "</s>",
           "<start_of_turn>", "<end_of_turn>", "<think>", "</think>", "<pad>", "<eos>", "<bos>", "<unk>"]
POOLS = [ENGLISH, CONTRACTIONS, ACCENTED, SCRIPTS, CJK, EMOJI, SPACES, NUMBERS, CODE, PUNCT]


def sentence():
    """Words from a few pools joined by mostly single spaces."""
    parts = []
    for _ in range(rng.randint(1, 14)):
        pool = rng.choices(POOLS, weights=[30, 4, 6, 4, 5, 3, 3, 5, 3, 6])[0]
        parts.append(rng.choice(pool))
        parts.append(rng.choice([" "] * 8 + ["", "  ", "\t"]))
    s = "".join(parts)
    if rng.random() < 0.5:
        s = s.strip(" ")
    if rng.random() < 0.3:
        s = s[:1].upper() + s[1:]
    return s


def soup():
    """Random characters across every class the pre-tokenizers tell apart."""
    chars = "".join("".join(p) for p in POOLS) + "AaZz09'\r\t "
    return "".join(rng.choice(chars) for _ in range(rng.randint(1, 40)))


def main():
    fixed = ["", "Hello world", " Hello world", "Hello  world ", "   ", "\t", "a", "'s", "'S", "'ll've",
             "I'm here", "I'M HERE", "2024", "12345678901234567890", "x1y22z333", "Ünïcödé", "🤖🤖", "👨‍👩‍👧‍👦",
             "<|im_start|>user\rHello<|im_end|>", "<s>Hello</s>", "<start_of_turn>user hi<end_of_turn>",
             "<|begin_of_text|><|eot_id|>", "text<think>reasoning</think>answer", " \r\r  x", "a \r b", "end   ",
             "‖⁂※", "ﬁ ligature", "ℌ𝔢𝔩𝔩𝔬", "ｆｕｌｌｗｉｄｔｈ", "a\u3000b", "a\u00a0b",
             "it'Sok", "HE'LLgo", "x'REy", "WE'VEgot", "don'Tx", "I'Dbe", "she'Mx", "'ve'd", "12'34", " 'tis",
             "a\u2028b\u2029c", "\r\r\r", "x \r\t y", "🤖'sok", "Ǆemal ǅ ǆ", "İİ ıI", "ΣΑΣ σας"]
    lines = fixed[:]
    # long lines: SentencePiece merges a whole segment at once (no pre-tokenizer)
    lines.append(" ".join(sentence() for _ in range(150)).replace("\n", " "))
    lines.append("the quick brown fox jumps over the lazy dog. " * 120)
    lines.append("".join(soup() for _ in range(100)))
    lines.append(" " * 700 + "x" + "\t" * 300 + "!" * 500)
    while len(lines) < N:
        r = rng.random()
        if r < 0.55:
            lines.append(sentence())
        elif r < 0.8:
            lines.append(soup())
        elif r < 0.9:
            lines.append(rng.choice(CODE) + rng.choice(["", " ", "  # note", "\t// x"]))
        else:
            lines.append(sentence() + rng.choice(SPECIAL) + sentence())
    out = [unicodedata.normalize("NFC", s) for s in lines[:N - 40]]
    # and 40 lines not in NFC: decomposed accents and Hangul, marks out of canonical order
    for _ in range(40):
        s = sentence()
        r = rng.random()
        out.append(unicodedata.normalize("NFD", s) if r < 0.5 else
                   s + "e\u0301\u0327 o\u0323\u0302 \u1100\u1161\u11a8 A\u030a\u0301" if r < 0.8 else
                   unicodedata.normalize("NFD", rng.choice(ACCENTED) + " " + rng.choice(CJK)))
    for s in out:
        assert "\n" not in s and "\x85" not in s and "\ufeff" not in s
        sys.stdout.write(s + "\n")


main()
