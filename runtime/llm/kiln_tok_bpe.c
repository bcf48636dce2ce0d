/*
 * kiln_tok_bpe.c — the two BPE encoders of kiln_tok.h. Both split their input into
 * initial symbols and merge adjacent pairs by rank, the lowest rank first and the
 * leftmost of equal ranks first, until no adjacent pair has a merge: that is the order in
 * which Hugging Face's BPE applies merges, so ids match. They differ in the symbols:
 *   byte-level (GPT-2, Llama-3, Qwen): each pre-token's bytes, one symbol per byte;
 *   SentencePiece (Llama-2, Gemma): UTF-8 characters of the normalized text (spaces are
 *   U+2581, held in the binary as spaces), a character outside the vocabulary as its
 *   bytes' <0xNN> pieces or UNK.
 * Quadratic in a word's length, which pre-tokenization keeps short (and a prompt line
 * for SentencePiece, which has no pre-tokenizer, is short enough).
 */
#include "kiln_tok_internal.h"

#include <string.h>

void kiln_tok_bpe_merge(const kiln_tok *t, int *sym, int *nsym) {
  int n = *nsym;
  for (;;) {
    int best = -1, at = -1;
    for (int i = 0; i + 1 < n; i++) {
      int r = kiln_tok_merge_rank(t, sym[i], sym[i + 1]);
      if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
    }
    if (at < 0) break;
    sym[at] = (int)t->merges[3 * best + 2];
    memmove(sym + at + 1, sym + at + 2, sizeof(int) * (size_t)(n - at - 2));
    n--;
  }
  *nsym = n;
}

/* Appends sym[0..k) to ids[*n..max); -1 on overflow. */
static int append(const int *sym, int k, int *ids, int *n, int max) {
  if (k > max - *n) return -1;
  memcpy(ids + *n, sym, sizeof(int) * (size_t)k);
  *n += k;
  return 0;
}

int kiln_tok_encode_bytelevel(const kiln_tok *t, const unsigned char *s, size_t len, int *ids, int *n, int max, void *work) {
  int *sym = work;
  for (size_t i = 0; i < len;) {
    size_t e = kiln_tok_pretok_next(t->pretok, s, len, i);
    int k = 0, whole = (t->flags & KILN_TOKF_IGNORE_MERGES) ? kiln_tok_lookup(t, s + i, e - i) : -1;
    if (whole >= 0) sym[k++] = whole;
    else
      for (size_t b = i; b < e; b++) sym[k++] = t->byte_id[s[b]];
    if (whole < 0) kiln_tok_bpe_merge(t, sym, &k);
    if (append(sym, k, ids, n, max) != 0) return -1;
    i = e;
  }
  return 0;
}

/* The normalized text of a SentencePiece segment into out: the dummy prefix if the
 * model adds one here (a Prepend normalizer: always; a Metaspace pre-tokenizer: unless
 * the segment starts with a space, and with prepend_scheme "first" only at the text's
 * start), U+2581 as a space (the binary spells it so); returns its length. */
static size_t spm_normalize(const kiln_tok *t, const unsigned char *s, size_t len, int first, unsigned char *out) {
  size_t m = 0;
  int spaced = s[0] == ' ' || (len >= 3 && s[0] == 0xe2 && s[1] == 0x96 && s[2] == 0x81);
  if ((t->flags & KILN_TOKF_PREFIX_SPACE) && (first || !(t->flags & KILN_TOKF_PREFIX_FIRST)) &&
      !(spaced && (t->flags & KILN_TOKF_PREFIX_UNLESS)))
    out[m++] = ' ';
  for (size_t i = 0; i < len; i++) {
    if (i + 2 < len && s[i] == 0xe2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) out[m++] = ' ', i += 2;
    else out[m++] = s[i];
  }
  return m;
}

int kiln_tok_encode_spm(const kiln_tok *t, const unsigned char *s, size_t len, int first, int *ids, int *n, int max, void *work) {
  int *sym = work;
  unsigned char *text = (unsigned char *)(sym + 2 * (len + 8));
  size_t m = spm_normalize(t, s, len, first, text);
  int k = 0;
  for (size_t i = 0; i < m;) {
    uint32_t cp;
    int cl = kiln_tok_utf8(text + i, m - i, &cp);
    int id = kiln_tok_lookup(t, text + i, (size_t)cl);
    if (id >= 0) sym[k++] = id;
    else if (t->flags & KILN_TOKF_BYTE_FALLBACK)
      for (int b = 0; b < cl; b++) sym[k++] = t->byte_id[text[i + (size_t)b]];
    else if (!(t->flags & KILN_TOKF_FUSE_UNK) || k == 0 || sym[k - 1] != t->unk) sym[k++] = t->unk;
    i += (size_t)cl;
  }
  kiln_tok_bpe_merge(t, sym, &k);
  return append(sym, k, ids, n, max);
}
