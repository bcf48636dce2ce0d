/*
 * kiln_tok_nfc.c — Unicode Normalization Form C, the normalizer of Qwen's tokenizer.json:
 * each character fully decomposed (canonical decompositions, Hangul by formula), combining
 * marks put in canonical order (a stable sort of each run of nonzero combining classes),
 * then composed again left to right (a mark joins the last starter unless blocked by a mark
 * of the same or a higher class in between), as UAX #15 specifies. The tables are
 * kiln_tok_nfc_table.c, generated from the Unicode Character Database.
 *
 * Bytes that are not UTF-8 pass through unchanged (as starters that compose with nothing).
 */
#include "kiln_tok_internal.h"

#include <string.h>

enum {
  SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
  LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT
};
#define RAW 0x110000u   /* RAW + b: byte b, which is not UTF-8, carried through */

/* The canonical combining class of cp (0 for a carried byte). */
static int ccc_of(uint32_t cp) { return cp >= RAW ? 0 : kiln_tok_ccc(cp); }

/* cp's full canonical decomposition into out (at most 4 code points); how many. */
static int decompose(uint32_t cp, uint32_t *out) {
  if (cp >= SBASE && cp < SBASE + SCOUNT) {
    uint32_t s = cp - SBASE;
    out[0] = LBASE + s / NCOUNT, out[1] = VBASE + s % NCOUNT / TCOUNT;
    if (s % TCOUNT) return out[2] = TBASE + s % TCOUNT, 3;
    return 2;
  }
  int n = cp < RAW ? kiln_tok_decompose(cp, out) : 0;
  if (n) return n;
  out[0] = cp;
  return 1;
}

/* The primary composite of a followed by b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
    return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
  if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT) return a + (b - TBASE);
  if (a >= RAW || b >= RAW) return 0;
  return kiln_tok_compose(a, b);
}

/* Puts each run of combining marks in canonical order: a stable insertion sort by class
 * (starters, class 0, never move). */
static void reorder(uint32_t *cps, size_t n) {
  for (size_t i = 1; i < n; i++) {
    uint32_t x = cps[i];
    int c = ccc_of(x);
    if (!c) continue;
    size_t j = i;
    while (j > 0 && ccc_of(cps[j - 1]) > c) cps[j] = cps[j - 1], j--;
    cps[j] = x;
  }
}

/* Canonical composition in place; the new count. */
static size_t recompose(uint32_t *cps, size_t n) {
  if (n == 0) return 0;
  size_t starter = 0, out = 1;
  int last = ccc_of(cps[0]) ? 256 : 0;   /* a leading mark has no starter to join */
  for (size_t i = 1; i < n; i++) {
    uint32_t ch = cps[i], comp = last == 256 ? 0 : compose(cps[starter], ch);
    int c = ccc_of(ch);
    if (comp && (last < c || last == 0)) {
      cps[starter] = comp;
      continue;
    }
    if (c == 0) starter = out;
    last = c;
    cps[out++] = ch;
  }
  return out;
}

/* cp as UTF-8 at out (a carried byte as itself); its length. */
static size_t put(uint32_t cp, unsigned char *out) {
  if (cp >= RAW) return out[0] = (unsigned char)(cp - RAW), 1;
  if (cp < 0x80) return out[0] = (unsigned char)cp, 1;
  if (cp < 0x800) return out[0] = (unsigned char)(0xc0 | cp >> 6), out[1] = (unsigned char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000) {
    out[0] = (unsigned char)(0xe0 | cp >> 12), out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    return out[2] = (unsigned char)(0x80 | (cp & 0x3f)), 3;
  }
  out[0] = (unsigned char)(0xf0 | cp >> 18), out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
  out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), out[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

size_t kiln_tok_nfc(const unsigned char *s, size_t len, uint32_t *cps, unsigned char *out) {
  size_t n = 0, m = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    int cl = kiln_tok_utf8(s + i, len - i, &cp);
    n += (size_t)decompose(cp == 0xFFFFFFFFu ? RAW + s[i] : cp, cps + n);
    i += (size_t)cl;
  }
  reorder(cps, n);
  n = recompose(cps, n);
  for (size_t k = 0; k < n; k++) m += put(cps[k], out + m);
  return m;
}
