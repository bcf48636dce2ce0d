#!/usr/bin/env python3
"""nfc_check.py NFC_TEST — runtime/llm/kiln_tok_nfc.c (built as tests/llm/nfc_test.c) against
Python's unicodedata.normalize("NFC") on 20000 random strings (seeded) of characters with
canonical decompositions, combining marks, conjoining jamo and Hangul syllables. Prints a
PASS or FAIL line (t_tok). Python's database may be older than Kiln's tables (15.0), but
decompositions and combining classes of assigned characters never change (Unicode's
stability policy), and the pool holds only characters Python knows."""
import random
import subprocess
import sys
import unicodedata as u

r = random.Random(5)
pool = [chr(c) for c in range(0x20000) if not (0xD800 <= c < 0xE000) and
        ((u.decomposition(chr(c)) and not u.decomposition(chr(c)).startswith("<")) or u.combining(chr(c)))]
pool += [chr(c) for c in range(0x1100, 0x1200)] + [chr(c) for c in range(0xAC00, 0xAC00 + 400)] + list("aeiouAEIOU ")
pool = [c for c in pool if c not in "\n\r\x85\u2028\u2029"]
lines = ["".join(r.choice(pool) for _ in range(r.randint(1, 30))) for _ in range(20000)]
inp = "".join(s + "\n" for s in lines).encode()
out = subprocess.run([sys.argv[1]], input=inp, capture_output=True).stdout.decode("utf-8", "replace").split("\n")
bad = [i for i, s in enumerate(lines) if i >= len(out) or u.normalize("NFC", s) != out[i]]
if bad:
    s = lines[bad[0]]
    print("FAIL tok/nfc: %d of %d strings differ from unicodedata's NFC, first %s" % (len(bad), len(lines), [hex(ord(c)) for c in s]))
else:
    print("PASS tok/nfc (%d random strings equal Python's unicodedata.normalize NFC, Unicode %s)" % (len(lines), u.unidata_version))
