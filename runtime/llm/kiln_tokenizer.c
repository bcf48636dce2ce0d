/*
 * kiln_tokenizer.c — see kiln_tokenizer.h.
 *
 * Encoding is SentencePiece's BPE as Llama-2 runs it: the text, with a space in front,
 * is split into UTF-8 characters, each the id of its piece (or its bytes' byte pieces);
 * then, while some adjacent pair's concatenation is a piece, the pair whose merged piece
 * scores highest is merged (the leftmost on a tie). Quadratic in the text's length in
 * the worst case, which prompts do not reach.
 */
#include "kiln_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *msg, long at) {
  if (err && errlen) snprintf(err, errlen, "tokenizer: %s (at byte %ld)", msg, at);
  return -1;
}

static int32_t get_i32(const unsigned char *p) { return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24); }

/* ids[0..n) sorted by piece text (then id): a merge sort through tmp, because qsort takes
 * no context and a global one would race when two threads load tokenizers. */
static int before(const kiln_spm *t, int x, int y) {
  int c = strcmp(t->piece[x], t->piece[y]);
  return c < 0 || (c == 0 && x < y);
}

static void sort_ids(const kiln_spm *t, int *ids, int *tmp, int n) {
  for (int width = 1; width < n; width *= 2) {
    for (int lo = 0; lo < n; lo += 2 * width) {
      int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = before(t, ids[j], ids[i]) ? ids[j++] : ids[i++];
      while (i < mid) tmp[k++] = ids[i++];
      while (j < hi) tmp[k++] = ids[j++];
    }
    memcpy(ids, tmp, sizeof(int) * (size_t)n);
  }
}

int kiln_spm_load(kiln_spm *t, const void *data, size_t size, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  const unsigned char *p = data, *end = p + size;
  if (size < 4) return fail(err, errlen, "shorter than its 4-byte header", 0);
  int max_len = get_i32(p);
  if (max_len < 1 || max_len > 4096) return fail(err, errlen, "max_token_length out of range", 0);
  /* First pass: count the tokens and their bytes, validating every length. */
  size_t n = 0, text = 0;
  for (const unsigned char *q = p + 4; q < end; n++) {
    if (end - q < 8) return fail(err, errlen, "truncated token record", (long)(q - p));
    int32_t len = get_i32(q + 4);
    if (len < 0 || len > max_len || end - q - 8 < len) return fail(err, errlen, "bad token length", (long)(q - p));
    if (memchr(q + 8, 0, (size_t)len)) return fail(err, errlen, "a piece holds a NUL byte", (long)(q - p));
    text += (size_t)len + 1;
    q += 8 + len;
  }
  if (n < 3 || n > 1000000) return fail(err, errlen, "vocabulary size out of range", (long)size);
  char *mem = malloc(n * (sizeof(char *) + sizeof(float) + sizeof(int)) + text);
  if (!mem) return fail(err, errlen, "out of memory", 0);
  t->mem = mem;
  t->piece = (char **)mem;
  t->score = (float *)(t->piece + n);
  t->sorted = (int *)(t->score + n);
  char *s = (char *)(t->sorted + n);
  const unsigned char *q = p + 4;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits = (uint32_t)get_i32(q);
    memcpy(&t->score[i], &bits, sizeof bits);
    int32_t len = get_i32(q + 4);
    memcpy(s, q + 8, (size_t)len);
    s[len] = 0;
    t->piece[i] = s;
    s += len + 1;
    q += 8 + len;
    t->sorted[i] = (int)i;
  }
  t->n = (int)n;
  t->max_len = max_len;
  int *tmp = malloc(sizeof(int) * n);
  if (!tmp) {
    kiln_spm_free(t);
    return fail(err, errlen, "out of memory", 0);
  }
  sort_ids(t, t->sorted, tmp, (int)n);
  free(tmp);
  for (int b = 0; b < 256; b++) t->bytes[b][0] = (char)b, t->bytes[b][1] = 0;
  t->byte_base = -1;
  for (int i = 0; i + 255 < t->n; i++)
    if (strcmp(t->piece[i], "<0x00>") == 0) {
      t->byte_base = i;
      break;
    }
  return 0;
}

void kiln_spm_free(kiln_spm *t) {
  free(t->mem);
  memset(t, 0, sizeof *t);
}

/* The id of piece s (len bytes), or -1: binary search of the sorted ids. */
static int lookup(const kiln_spm *t, const char *s, size_t len) {
  int lo = 0, hi = t->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2, id = t->sorted[mid];
    int c = strncmp(t->piece[id], s, len);
    if (c == 0 && t->piece[id][len] != 0) c = 1;
    if (c == 0) return id;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* The work area: a merge buffer of two pieces, then (aligned for int) the ids. */
static size_t ids_offset(const kiln_spm *t) { return (2 * (size_t)t->max_len + 2 + 7) / 8 * 8; }

size_t kiln_spm_work_size(const kiln_spm *t, size_t text_len) { return ids_offset(t) + (text_len + 2) * sizeof(int); }

/* Bytes of the UTF-8 character at s (1 for an invalid lead or continuation). */
static int utf8_len(const unsigned char *s) {
  int n = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 : (*s & 0xf0) == 0xe0 ? 3 : (*s & 0xf8) == 0xf0 ? 4 : 1;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 1;
  return n;
}

int kiln_spm_encode(const kiln_spm *t, const char *text, int *ids, int max_ids, void *work) {
  char *buf = work;
  int *tmp = (int *)(buf + ids_offset(t));   /* the ids before merging */
  size_t len = strlen(text);
  int n = 0;
  if (len == 0) return 0;
  /* characters: the dummy prefix, then the text */
  for (size_t i = 0; i <= len;) {
    const unsigned char *c = i == 0 ? (const unsigned char *)" " : (const unsigned char *)text + i - 1;
    int cl = i == 0 ? 1 : utf8_len(c);
    int id = lookup(t, (const char *)c, (size_t)cl);
    if (id >= 0) tmp[n++] = id;
    else
      for (int b = 0; b < cl; b++) tmp[n++] = t->byte_base >= 0 ? t->byte_base + c[b] : 0;
    i += i == 0 ? 1 : (size_t)cl;
  }
  /* merges: the best-scoring adjacent pair whose concatenation is a piece, until none */
  for (;;) {
    float best = 0;
    int at = -1, best_id = -1;
    for (int i = 0; i + 1 < n; i++) {
      size_t a = strlen(t->piece[tmp[i]]), b = strlen(t->piece[tmp[i + 1]]);
      if (a + b > (size_t)t->max_len) continue;
      memcpy(buf, t->piece[tmp[i]], a);
      memcpy(buf + a, t->piece[tmp[i + 1]], b);
      int id = lookup(t, buf, a + b);
      if (id >= 0 && (at < 0 || t->score[id] > best)) best = t->score[id], at = i, best_id = id;
    }
    if (at < 0) break;
    tmp[at] = best_id;
    memmove(tmp + at + 1, tmp + at + 2, sizeof(int) * (size_t)(n - at - 2));
    n--;
  }
  if (n > max_ids) return -1;
  memcpy(ids, tmp, sizeof(int) * (size_t)n);
  return n;
}

const char *kiln_spm_piece(const kiln_spm *t, int prev, int id) {
  if (id < 0 || id >= t->n) return NULL;
  const char *p = t->piece[id];
  if (prev == 1 && p[0] == ' ') p++;
  unsigned v;
  if (t->byte_base >= 0 && id >= t->byte_base && id < t->byte_base + 256 && sscanf(p, "<0x%02X>", &v) == 1 && v < 256)
    return t->bytes[v];
  return p;
}
