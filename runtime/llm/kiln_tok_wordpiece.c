/*
 * kiln_tok_wordpiece.c — BERT's WordPiece encoder: the basic tokenizer (control characters
 * dropped, text split at White_Space, every character that is neither letter, number nor
 * space a word of its own, CJK ideographs likewise when the model says so, ASCII letters
 * lowercased when it says so), then per word greedy longest-match-first, pieces after the
 * first spelt with a "##" prefix; a word with no split into pieces is one UNK.
 *
 * Limits: lowercasing and accent stripping cover ASCII only (Kiln has no case or
 * decomposition table yet); BERT's punctuation class is approximated by "neither letter,
 * number nor space".
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

/* Greedy longest-match-first over word w[0..len) (already normalized); buf holds len+2. */
static int encode_word(const kiln_tok *t, const unsigned char *w, size_t len, unsigned char *buf, int *ids, int *n, int max) {
  int start_n = *n;
  size_t chars = 0;
  for (size_t i = 0; i < len; chars++) {
    uint32_t cp;
    i += (size_t)kiln_tok_utf8(w + i, len - i, &cp);
  }
  for (size_t start = 0; start < len && chars <= MAX_WORD_CHARS;) {
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
    if (start == len) return 0;
  }
  *n = start_n;   /* no split: the word is UNK */
  if (*n >= max) return -1;
  ids[(*n)++] = t->unk;
  return 0;
}

int kiln_tok_encode_wordpiece(const kiln_tok *t, const unsigned char *s, size_t len, int *ids, int *n, int max, void *work) {
  unsigned char *word = work, *buf = word + len + 8;
  size_t wl = 0;
  for (size_t i = 0; i <= len;) {
    uint32_t cp = ' ';
    int cl = i < len ? kiln_tok_utf8(s + i, len - i, &cp) : 1;
    int c = kiln_tok_uclass(cp);
    int alone = c == KILN_UC_OTHER || ((t->flags & KILN_TOKF_CJK_SPLIT) && is_cjk(cp));
    int control = cp < 0x20 && c != KILN_UC_SPACE;
    if (c == KILN_UC_SPACE || alone || i == len) {
      if (wl && encode_word(t, word, wl, buf, ids, n, max) != 0) return -1;
      wl = 0;
    }
    if (alone && !control && cp != 0xFFFFFFFFu && encode_word(t, s + i, (size_t)cl, buf, ids, n, max) != 0) return -1;
    if (c != KILN_UC_SPACE && !alone && i < len) {
      for (int b = 0; b < cl; b++) {
        unsigned char ch = s[i + (size_t)b];
        word[wl++] = (t->flags & KILN_TOKF_LOWERCASE) && ch >= 'A' && ch <= 'Z' ? (unsigned char)(ch + 32) : ch;
      }
    }
    i += (size_t)cl;
  }
  return 0;
}
