/*
 * kiln_tok_wordpiece.c — BERT's WordPiece encoder. First BERT's normalizer and
 * pre-tokenizer, one character at a time: controls, NUL and U+FFFD dropped; White_Space
 * ends a word; CJK ideographs are words of their own (when the model says so); accents
 * stripped (canonical decomposition, nonspacing marks dropped; Hangul syllables into
 * their jamo) and letters lowercased (when the model says so); then punctuation (ASCII
 * symbols and Unicode P*) is a word of its own. Then per word greedy longest-match-first,
 * pieces after the first spelt with a "##" prefix; a word with no such split, or longer
 * than 100 characters, is one UNK.
 *
 * Bytes that are not UTF-8 stay in their word, which then has no split: UNK.
 * Lowercasing: simple mappings, plus U+0130 and a final capital sigma (kiln_tok_unicode.c).
 */
#include "kiln_tok_internal.h"

#include <string.h>

enum { MAX_WORD_CHARS = 100 };   /* BERT's max_input_chars_per_word: longer words are UNK */

/* CJK ideographs, the blocks BERT's _is_chinese_char lists. */
static int is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* BERT's punctuation: the ASCII symbols, and every Unicode P* character. */
static int is_punct(uint32_t cp) {
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126) ||
         kiln_tok_uclass(cp) == KILN_UC_PUNCT;
}

/* cp as UTF-8 at out; its length. */
static size_t put_utf8(uint32_t cp, unsigned char *out) {
  if (cp < 0x80) return out[0] = (unsigned char)cp, 1;
  if (cp < 0x800) return out[0] = (unsigned char)(0xc0 | cp >> 6), out[1] = (unsigned char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000) {
    out[0] = (unsigned char)(0xe0 | cp >> 12), out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (unsigned char)(0xf0 | cp >> 18), out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
  out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), out[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Greedy longest-match-first over word w[0..len) (normalized); buf holds len+2 bytes. */
static int encode_word(const kiln_tok *t, const unsigned char *w, size_t len, unsigned char *buf, int *ids, int *n, int max) {
  int start_n = *n;
  size_t chars = 0, start = 0;
  for (size_t i = 0; i < len; chars++) {
    uint32_t cp;
    i += (size_t)kiln_tok_utf8(w + i, len - i, &cp);
  }
  while (start < len && chars <= MAX_WORD_CHARS) {
    int found = -1;
    size_t end = len;
    for (; end > start; end--) {
      if (end < len && (w[end] & 0xc0) == 0x80) continue;   /* whole characters only */
      size_t k = 0;
      if (start > 0) buf[k++] = '#', buf[k++] = '#';
      memcpy(buf + k, w + start, end - start);
      if ((found = kiln_tok_lookup(t, buf, k + end - start)) >= 0) break;
    }
    if (found < 0) break;
    if (*n >= max) return -1;
    ids[(*n)++] = found;
    start = end;
  }
  if (start == len && len) return 0;
  *n = start_n;   /* no split: the word is UNK */
  if (*n >= max) return -1;
  ids[(*n)++] = t->unk;
  return 0;
}

/* The normalized code points of cp (accents stripped, lowercased, as the flags say) into
 * out[0..4); how many. */
static int normalize(const kiln_tok *t, uint32_t cp, uint32_t out[4]) {
  uint32_t d[3];
  int n = 0, nd;
  if ((t->flags & KILN_TOKF_STRIP_ACCENTS) && cp >= 0xAC00 && cp < 0xAC00 + 11172) {   /* Hangul: L V (T) jamo */
    uint32_t s = cp - 0xAC00;
    d[0] = 0x1100 + s / 588, d[1] = 0x1161 + s % 588 / 28, d[2] = 0x11A7 + s % 28;
    nd = s % 28 ? 3 : 2;
  } else nd = (t->flags & KILN_TOKF_STRIP_ACCENTS) ? kiln_tok_strip_marks(cp, d) : (d[0] = cp, 1);
  for (int k = 0; k < nd; k++) {
    uint32_t c = d[k];
    if ((t->flags & KILN_TOKF_STRIP_ACCENTS) && kiln_tok_uclass(c) == KILN_UC_MARK) continue;
    if ((t->flags & KILN_TOKF_LOWERCASE) && c == 0x130) {   /* İ lowercases to i + U+0307 */
      out[n++] = 'i';
      if (!(t->flags & KILN_TOKF_STRIP_ACCENTS)) out[n++] = 0x307;
      continue;
    }
    out[n++] = (t->flags & KILN_TOKF_LOWERCASE) ? kiln_tok_lower(c) : c;
  }
  return n;
}

/* Unicode's Final_Sigma, as lowercasing a whole string applies it: a capital sigma at i
 * after a letter (prev) and before no letter lowercases to the final form. (Case-ignorable
 * characters between are not skipped: a simplification.) */
static int final_sigma(const unsigned char *s, size_t len, size_t i, uint32_t prev) {
  uint32_t next = 0;
  if (i + 2 < len) kiln_tok_utf8(s + i + 2, len - i - 2, &next);
  return prev && kiln_tok_uclass(prev) == KILN_UC_LETTER && !(next && kiln_tok_uclass(next) == KILN_UC_LETTER);
}

/* One pass over the characters: drop, split, or normalize into the current word. */
int kiln_tok_encode_wordpiece(const kiln_tok *t, const unsigned char *s, size_t len, int *ids, int *n, int max, void *work) {
  unsigned char *word = work, *buf = word + 3 * len + 8;   /* normalizing grows text at most 3x */
  size_t wl = 0;
  uint32_t prev = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp, norm[4];
    int cl = kiln_tok_utf8(s + i, len - i, &cp), c = kiln_tok_uclass(cp);
    int nn = cp == 0xFFFFFFFFu ? 0 : normalize(t, cp, norm);
    if (cp == 0x3A3 && (t->flags & KILN_TOKF_LOWERCASE) && final_sigma(s, len, i, prev)) norm[0] = 0x3C2;
    if (cp == 0xFFFFFFFFu) word[wl++] = s[i];   /* not UTF-8: kept, the word becomes UNK */
    else if (cp == 0 || cp == 0xFFFD || c == KILN_UC_CONTROL) nn = 0;
    else if (c == KILN_UC_SPACE || ((t->flags & KILN_TOKF_CJK_SPLIT) && is_cjk(cp))) {
      if (wl && encode_word(t, word, wl, buf, ids, n, max) != 0) return -1;
      wl = 0;
      if (c == KILN_UC_SPACE) nn = 0;
      else if (encode_word(t, s + i, (size_t)cl, buf, ids, n, max) != 0) return -1;
      if (c != KILN_UC_SPACE) nn = 0;
    }
    for (int k = 0; k < nn; k++) {
      unsigned char u[4];
      size_t ul = put_utf8(norm[k], u);
      if (!is_punct(norm[k])) {
        memcpy(word + wl, u, ul), wl += ul;
        continue;
      }
      if (wl && encode_word(t, word, wl, buf, ids, n, max) != 0) return -1;
      wl = 0;
      if (encode_word(t, u, ul, buf, ids, n, max) != 0) return -1;
    }
    prev = cp;
    i += (size_t)cl;
  }
  if (wl && encode_word(t, word, wl, buf, ids, n, max) != 0) return -1;
  return 0;
}
