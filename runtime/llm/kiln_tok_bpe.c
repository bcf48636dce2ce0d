/*
 * kiln_tok_bpe.c — the two BPE encoders of kiln_tok.h. Both split their input into
 * initial symbols and merge adjacent pairs by rank, the lowest rank first and the
 * leftmost of equal ranks first, until no adjacent pair has a merge: that is the order in
 * which Hugging Face's BPE applies merges, so ids match. They differ in the symbols:
 *   byte-level (GPT-2, Llama-3, Qwen): each pre-token's bytes, one symbol per byte;
 *   SentencePiece (Llama-2, Gemma): UTF-8 characters of the normalized text (spaces are
 *   U+2581, held in the binary as spaces), a character outside the vocabulary as its
 *   bytes' <0xNN> pieces or UNK.
 * O(n log n) in a word's length (SentencePiece has no pre-tokenizer: a whole text
 * segment is one word).
 */
#include "kiln_tok_internal.h"

#include <string.h>

/* A min-heap of candidate merges, each (rank << 32 | position of its left symbol): the
 * lowest rank first, the leftmost of equal ranks first. */
typedef struct {
  uint64_t *key;
  int n;
} Heap;

/* Adds k (the caller sized the heap: at most three candidates per symbol). */
static void heap_push(Heap *h, uint64_t k) {
  int i = h->n++;
  while (i > 0 && h->key[(i - 1) / 2] > k) h->key[i] = h->key[(i - 1) / 2], i = (i - 1) / 2;
  h->key[i] = k;
}

/* Removes and returns the smallest key (h->n > 0). */
static uint64_t heap_pop(Heap *h) {
  uint64_t top = h->key[0], last = h->key[--h->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->key[c + 1] < h->key[c]) c++;
    if (h->key[c] >= last) break;
    h->key[i] = h->key[c], i = c;
  }
  if (h->n) h->key[i] = last;
  return top;
}

/* Queues the merge of the symbol at i with the one after it, if there is one. */
static void candidate(const kiln_tok *t, Heap *h, const int *sym, const int *next, int i) {
  if (i < 0 || next[i] < 0) return;
  int r = kiln_tok_merge_rank(t, sym[i], sym[next[i]]);
  if (r >= 0) heap_push(h, (uint64_t)r << 32 | (uint32_t)i);
}

/* Merges by rank in O(n log n): symbols in a linked list (positions never move), the
 * candidate pairs in a heap; a popped candidate whose pair has since changed is stale
 * (its rank no longer names the pair at its position) and is dropped. */
void kiln_tok_bpe_merge(const kiln_tok *t, int *sym, int *nsym, void *scratch) {
  int n = *nsym, *prev = scratch, *next = prev + n;
  Heap h = {(uint64_t *)(next + n), 0};   /* 8-byte aligned: scratch is, and 2n ints precede it */
  for (int i = 0; i < n; i++) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  for (int i = 0; i + 1 < n; i++) candidate(t, &h, sym, next, i);
  while (h.n) {
    uint64_t k = heap_pop(&h);
    int i = (int)(uint32_t)k, r = (int)(k >> 32), j = next[i];
    if (sym[i] < 0 || j < 0 || kiln_tok_merge_rank(t, sym[i], sym[j]) != r) continue;
    sym[i] = (int)t->merges[3 * r + 2];
    sym[j] = -1;   /* gone */
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    candidate(t, &h, sym, next, prev[i]);
    candidate(t, &h, sym, next, i);
  }
  int m = 0;
  for (int i = 0; i < n; i++)
    if (sym[i] >= 0) sym[m++] = sym[i];
  *nsym = m;
}

/* Appends sym[0..k) to ids[*n..max); -1 on overflow. */
static int append(const int *sym, int k, int *ids, int *n, int max) {
  if (k > max - *n) return -1;
  memcpy(ids + *n, sym, sizeof(int) * (size_t)k);
  *n += k;
  return 0;
}

/* Each pre-token: a whole vocabulary entry (ignore_merges) or its bytes merged. */
int kiln_tok_encode_bytelevel(const kiln_tok *t, const unsigned char *s, size_t len, int *ids, int *n, int max, void *work) {
  int *sym = work;
  void *scratch = sym + ((len + 9) & ~(size_t)1);   /* 8-byte aligned: the heap holds uint64_t */
  for (size_t i = 0; i < len;) {
    size_t e = kiln_tok_pretok_next(t->pretok, s, len, i);
    int k = 0, whole = (t->flags & KILN_TOKF_IGNORE_MERGES) ? kiln_tok_lookup(t, s + i, e - i) : -1;
    if (whole >= 0) sym[k++] = whole;
    else
      for (size_t b = i; b < e; b++) sym[k++] = t->byte_id[s[b]];
    if (whole < 0) kiln_tok_bpe_merge(t, sym, &k, scratch);
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

/* The normalized segment's characters (or their byte pieces, or UNK), merged. */
int kiln_tok_encode_spm(const kiln_tok *t, const unsigned char *s, size_t len, int first, int *ids, int *n, int max, void *work) {
  int *sym = work;
  void *scratch = sym + ((len + 9) & ~(size_t)1);   /* 8-byte aligned: the heap holds uint64_t */
  unsigned char *text = (unsigned char *)sym + KILN_TOK_TEXT_AT(len);
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
  kiln_tok_bpe_merge(t, sym, &k, scratch);
  return append(sym, k, ids, n, max);
}
