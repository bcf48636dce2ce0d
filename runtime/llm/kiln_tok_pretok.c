/*
 * kiln_tok_pretok.c — the pre-tokenizers of byte-level BPE models: the split patterns of
 * GPT-2, Llama-3 and Qwen2/3, scanned by hand instead of by a regex engine. Each scanner
 * answers "where does the match that starts here end", trying the pattern's alternatives
 * in order as a backtracking regex engine would (leftmost alternative first, greedy
 * quantifiers giving back one character at a time). The patterns, from the models'
 * tokenizer.json files ("Split" with behavior "Isolated"; \p{L} letters, \p{N} numbers,
 * \s White_Space, classes from kiln_tok_unicode.c):
 *
 *   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   Llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   Qwen2/3: Llama-3's with \p{N} instead of \p{N}{1,3}.
 *
 * Bytes that are not UTF-8 count as one character of class "other" (punctuation).
 */
#include "kiln_tok_internal.h"

#include <string.h>

/* The class of the character at s[i] (i < n) and its length in *len. */
static int cls(const unsigned char *s, size_t n, size_t i, size_t *len) {
  uint32_t cp;
  *len = (size_t)kiln_tok_utf8(s + i, n - i, &cp);
  int c = kiln_tok_uclass(cp);
  return c <= KILN_UC_SPACE ? c : KILN_UC_OTHER;   /* the patterns know no finer classes */
}

/* The end of the run of characters of class c from i; *last gets the start of the run's
 * last character. */
static size_t run(const unsigned char *s, size_t n, size_t i, int c, size_t *last) {
  size_t len;
  *last = i;
  while (i < n && cls(s, n, i, &len) == c) *last = i, i += len;
  return i;
}

/* The end of the run of characters that are neither letters, numbers nor spaces. */
static size_t run_other(const unsigned char *s, size_t n, size_t i) {
  size_t last;
  return run(s, n, i, KILN_UC_OTHER, &last);
}

/* The length of a contraction ('s 't 're 've 'm 'll 'd) at i, or 0; any case if fold. */
static size_t contraction(const unsigned char *s, size_t n, size_t i, int fold) {
  if (s[i] != '\'' || i + 1 >= n) return 0;
  unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
  if (fold && a >= 'A' && a <= 'Z') a = (unsigned char)(a + 32);
  if (fold && b >= 'A' && b <= 'Z') b = (unsigned char)(b + 32);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

/* \s+(?!\S) then \s+ at a space at i: the run, less its last character when a non-space
 * follows the run and the run has more than one character. */
static size_t spaces(const unsigned char *s, size_t n, size_t i) {
  size_t last, e = run(s, n, i, KILN_UC_SPACE, &last);
  if (e == n || last == i) return e;
  return last;
}

/* GPT-2's pattern at i. */
static size_t next_gpt2(const unsigned char *s, size_t n, size_t i) {
  size_t len, last, c = contraction(s, n, i, 0);
  if (c) return i + c;
  int k = cls(s, n, i, &len);
  size_t j = i;
  if (s[i] == ' ' && i + 1 < n) {   /* " ?X+": the optional space, if a non-space follows */
    size_t l2;
    int k2 = cls(s, n, i + 1, &l2);
    if (k2 != KILN_UC_SPACE) k = k2, j = i + 1;
  }
  if (k == KILN_UC_LETTER || k == KILN_UC_NUMBER) return run(s, n, j, k, &last);
  if (k == KILN_UC_OTHER) return run_other(s, n, j);
  return spaces(s, n, i);
}

/* Llama-3's pattern (digits up to three at a time), or Qwen2's (one at a time). */
static size_t next_llama3(const unsigned char *s, size_t n, size_t i, int max_digits) {
  size_t len, last, c = contraction(s, n, i, 1);
  if (c) return i + c;
  int k = cls(s, n, i, &len);
  if (k == KILN_UC_LETTER) return run(s, n, i, k, &last);
  /* [^\r\n\p{L}\p{N}]?\p{L}+ : one non-letter, non-number, non-newline before letters */
  if (k != KILN_UC_NUMBER && s[i] != '\r' && s[i] != '\n' && i + len < n) {
    size_t l2;
    if (cls(s, n, i + len, &l2) == KILN_UC_LETTER) return run(s, n, i + len, KILN_UC_LETTER, &last);
  }
  if (k == KILN_UC_NUMBER) {
    size_t e = i;
    for (int d = 0; d < max_digits && e < n && cls(s, n, e, &len) == KILN_UC_NUMBER; d++) e += len;
    return e;
  }
  /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
  size_t j = k == KILN_UC_OTHER ? i : s[i] == ' ' && i + 1 < n && cls(s, n, i + 1, &len) == KILN_UC_OTHER ? i + 1 : n;
  if (j < n) {
    size_t e = run_other(s, n, j);
    while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
    return e;
  }
  /* \s*[\r\n]+ : the space run up to its last newline */
  size_t e = run(s, n, i, KILN_UC_SPACE, &last), nl = n;
  for (size_t p = i; p < e; p++)
    if (s[p] == '\r' || s[p] == '\n') nl = p;
  if (nl < n) return nl + 1;
  return spaces(s, n, i);
}

/* Dispatches on the pattern; the end is always past i. */
size_t kiln_tok_pretok_next(int pretok, const unsigned char *s, size_t n, size_t i) {
  size_t e;
  switch (pretok) {
  case KILN_PRE_GPT2: e = next_gpt2(s, n, i); break;
  case KILN_PRE_LLAMA3: e = next_llama3(s, n, i, 3); break;
  case KILN_PRE_QWEN2: e = next_llama3(s, n, i, 1); break;
  default: return n;
  }
  if (e <= i) {   /* cannot happen for the patterns above; never loop forever */
    size_t len;
    cls(s, n, i, &len);
    e = i + len;
  }
  return e;
}
