/*
 * kiln_tok.c — see kiln_tok.h: loading the binary, the lookups every kind shares, added
 * tokens, and decoding. The encoders of each kind live in kiln_tok_bpe.c (byte-level and
 * SentencePiece BPE) and kiln_tok_wordpiece.c.
 *
 * The loader trusts nothing in the file: every offset, id and length is checked before
 * it is used, so a damaged file is a message, never a read out of bounds (the fuzz
 * target tests/robust/fuzz_tok.c holds it to that).
 */
#include "kiln_tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one-line message "tokenizer: <field>: <what>"; returns -1. */
static int fail(char *err, size_t errlen, const char *field, const char *what) {
  if (err && errlen) snprintf(err, errlen, "tokenizer: %s: %s", field, what);
  return -1;
}

/* The n-byte little-endian integer at p (n <= 8), whatever the host's byte order. */
static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* FNV-1a 64, the weights file's checksum (runtime/kiln_runtime.c), again here so the
 * tokenizer needs no other runtime file. */
static uint64_t fnv1a64(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

static uint32_t hash_bytes(const unsigned char *s, size_t n) { return (uint32_t)fnv1a64(s, n); }

/* A hash of the id pair (a, b): Fibonacci hashing of the two as one 64-bit word. */
static uint32_t hash_pair(uint32_t a, uint32_t b) {
  uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ULL;
  return (uint32_t)(h >> 32);
}

int kiln_tok_is(const void *head, size_t n) { return n >= 8 && memcmp(head, "KILNTOK1", 8) == 0; }

/* The smallest power of two minus one whose table is at least twice n. */
static uint32_t mask_for(uint32_t n) {
  uint32_t m = 15;
  while (m + 1 < 2 * (uint64_t)n) m = m * 2 + 1;
  return m;
}

/* The bytes of id's piece and their count (0: an unused id); id must be in range. */
static const unsigned char *piece(const kiln_tok *t, int id, size_t *len) {
  *len = t->off[id + 1] - t->off[id];
  return t->text + t->off[id];
}

/* Linear probing from the bytes' hash; an empty slot ends the search. */
int kiln_tok_lookup(const kiln_tok *t, const unsigned char *s, size_t len) {
  for (uint32_t h = hash_bytes(s, len) & t->hash_mask;; h = (h + 1) & t->hash_mask) {
    int id = t->piece_hash[h];
    if (id < 0) return -1;
    size_t plen;
    const unsigned char *p = piece(t, id, &plen);
    if (plen == len && memcmp(p, s, len) == 0) return id;
  }
}

/* The rank of merging ids a and b, or -1. */
int kiln_tok_merge_rank(const kiln_tok *t, int a, int b) {
  for (uint32_t h = hash_pair((uint32_t)a, (uint32_t)b) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
    int m = t->merge_hash[h];
    if (m < 0) return -1;
    if (t->merges[3 * m] == (uint32_t)a && t->merges[3 * m + 1] == (uint32_t)b) return m;
  }
}

/* Decodes one character strictly (no overlong forms, surrogates or code points past
 * U+10FFFF), so every tokenizer sees invalid bytes the same way. */
int kiln_tok_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
  unsigned c = s[0];
  int len = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
  if (len == 1) return *cp = c, 1;
  if (len == 0 || (size_t)len > n) return *cp = 0xFFFFFFFFu, 1;
  uint32_t v = c & (0x7f >> len);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return *cp = 0xFFFFFFFFu, 1;
    v = v << 6 | (s[i] & 0x3f);
  }
  /* overlong forms, surrogates, beyond U+10FFFF */
  if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
    return *cp = 0xFFFFFFFFu, 1;
  *cp = v;
  return len;
}

/* ---- loading ---- */

/* The header: magic, version, size, checksum; *payload and *plen the checked payload. */
static int check_header(const unsigned char *p, size_t size, char *err, size_t errlen) {
  if (size < KILN_TOK_HEADER) return fail(err, errlen, "header", "file shorter than its 32-byte header");
  if (!kiln_tok_is(p, size)) return fail(err, errlen, "magic", "not a Kiln tokenizer (KILNTOK1)");
  if (get_le(p + 8, 4) != KILN_TOK_VERSION) return fail(err, errlen, "version", "unsupported version");
  if (get_le(p + 12, 4) != KILN_TOK_HEADER) return fail(err, errlen, "header size", "not 32");
  uint64_t want = get_le(p + 16, 8);
  if (want > size - KILN_TOK_HEADER) return fail(err, errlen, "payload size", "file truncated");
  if (want < size - KILN_TOK_HEADER) return fail(err, errlen, "payload size", "bytes after the payload");
  if (fnv1a64(p + KILN_TOK_HEADER, (size_t)want) != get_le(p + 24, 8))
    return fail(err, errlen, "checksum", "payload corrupt");
  return 0;
}

/* The fields and table offsets; validates counts against the payload's size. */
static int read_fields(kiln_tok *t, uint32_t *w, size_t plen, size_t *text_at, char *err, size_t errlen) {
  if (plen < 4 * KILN_TOK_FIELDS) return fail(err, errlen, "fields", "payload too short");
  t->kind = (int)w[0], t->pretok = (int)w[1], t->flags = (int)w[2];
  t->n = (int)w[3], t->n_merges = (int)w[4], t->n_added = (int)w[5];
  t->bos = (int)w[6], t->eos = (int)w[7], t->unk = (int)w[8];
  if (w[0] < 1 || w[0] > 3) return fail(err, errlen, "kind", "unknown tokenizer kind");
  if (w[1] > 3) return fail(err, errlen, "pre-tokenizer", "unknown pattern");
  if (w[2] >= 2048) return fail(err, errlen, "flags", "unknown flag");
  if (w[3] < 1 || w[3] > (1u << 24)) return fail(err, errlen, "vocabulary size", "out of range");
  if (w[4] > (1u << 24) || (w[0] == KILN_TOK_WORDPIECE && w[4])) return fail(err, errlen, "merges", "count out of range");
  if (w[5] > w[3]) return fail(err, errlen, "added tokens", "count out of range");
  for (int k = 6; k < 9; k++)
    if (w[k] != 0xFFFFFFFFu && w[k] >= w[3]) return fail(err, errlen, k == 6 ? "bos" : k == 7 ? "eos" : "unk", "id out of range");
  for (int k = 9; k < KILN_TOK_FIELDS; k++)
    if (w[k]) return fail(err, errlen, "reserved field", "not 0");
  uint64_t words = KILN_TOK_FIELDS + (uint64_t)w[3] + 1 + 3 * (uint64_t)w[4] + 4 * (uint64_t)w[5];
  if (words * 4 > plen) return fail(err, errlen, "tables", "longer than the payload");
  *text_at = (size_t)words * 4;
  return 0;
}

/* Pieces, merges and added tokens: every offset and id in range, every merge the
 * concatenation of its parts. */
static int check_tables(const kiln_tok *t, size_t text_len, char *err, size_t errlen) {
  if (t->off[0] != 0 || t->off[t->n] > text_len) return fail(err, errlen, "piece offsets", "outside the text");
  for (int i = 0; i < t->n; i++) {
    if (t->off[i + 1] < t->off[i]) return fail(err, errlen, "piece offsets", "decreasing");
    if (t->off[i + 1] - t->off[i] > 65536) return fail(err, errlen, "piece", "longer than 64 KiB");
  }
  for (int m = 0; m < t->n_merges; m++) {
    const uint32_t *g = t->merges + 3 * m;
    if (g[0] >= (uint32_t)t->n || g[1] >= (uint32_t)t->n || g[2] >= (uint32_t)t->n) return fail(err, errlen, "merge", "id out of range");
    size_t la, lb, lr;
    const unsigned char *a = piece(t, (int)g[0], &la), *b = piece(t, (int)g[1], &lb), *r = piece(t, (int)g[2], &lr);
    if (!la || !lb || lr != la + lb || memcmp(r, a, la) != 0 || memcmp(r + la, b, lb) != 0)
      return fail(err, errlen, "merge", "merged piece is not its parts joined");
  }
  for (int k = 0; k < t->n_added; k++) {
    const uint32_t *a = t->added + 4 * k;
    if (a[0] >= (uint32_t)t->n || a[1] > 7) return fail(err, errlen, "added token", "id or flags out of range");
    if (a[3] == 0 || a[2] > text_len || a[3] > text_len - a[2]) return fail(err, errlen, "added token", "text empty or outside the text");
  }
  return 0;
}

/* Added token x before y: by first byte, then longer first (leftmost-longest matching
 * tries them in this order), then id. */
static int added_before(const kiln_tok *t, const uint32_t *x, const uint32_t *y) {
  unsigned char fx = t->text[x[2]], fy = t->text[y[2]];
  if (fx != fy) return fx < fy;
  if (x[3] != y[3]) return x[3] > y[3];
  return x[0] < y[0];
}

/* Sorts the added tokens (4 words each) in place through tmp: a bottom-up merge sort. */
static void sort_added(const kiln_tok *t, uint32_t *a, uint32_t *tmp, int n) {
  for (int width = 1; width < n; width *= 2) {
    for (int lo = 0; lo < n; lo += 2 * width) {
      int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int i = lo, j = mid, k = lo;
      while (i < mid || j < hi) {
        int take_j = i >= mid || (j < hi && added_before(t, a + 4 * j, a + 4 * i));
        memcpy(tmp + 4 * k++, a + 4 * (take_j ? j++ : i++), 4 * sizeof(uint32_t));
      }
    }
    memcpy(a, tmp, sizeof(uint32_t) * 4 * (size_t)n);
  }
}

/* The lookup tables: pieces by text (the lowest id of a text wins), merges by pair (the
 * best rank of a pair wins), added tokens by first byte, byte pieces. */
static int build_index(kiln_tok *t, char *err, size_t errlen) {
  for (uint32_t h = 0; h <= t->hash_mask; h++) t->piece_hash[h] = -1;
  for (int id = 0; id < t->n; id++) {
    size_t len;
    const unsigned char *p = piece(t, id, &len);
    if (len == 0) continue;
    if ((int)len > t->max_piece) t->max_piece = (int)len;
    if (kiln_tok_lookup(t, p, len) >= 0) continue;
    uint32_t h = hash_bytes(p, len) & t->hash_mask;
    while (t->piece_hash[h] >= 0) h = (h + 1) & t->hash_mask;
    t->piece_hash[h] = id;
  }
  for (uint32_t h = 0; h <= t->merge_mask; h++) t->merge_hash[h] = -1;
  for (int m = 0; m < t->n_merges; m++) {
    if (kiln_tok_merge_rank(t, (int)t->merges[3 * m], (int)t->merges[3 * m + 1]) >= 0) continue;
    uint32_t h = hash_pair(t->merges[3 * m], t->merges[3 * m + 1]) & t->merge_mask;
    while (t->merge_hash[h] >= 0) h = (h + 1) & t->merge_mask;
    t->merge_hash[h] = m;
  }
  for (int b = 0, k = 0; b <= 256; b++) {
    while (k < t->n_added && t->text[t->added[4 * k + 2]] < b) k++;
    t->added_at[b] = b == 256 ? t->n_added : k;
  }
  if (t->kind != KILN_TOK_BYTE_BPE && t->unk < 0 && !(t->flags & KILN_TOKF_BYTE_FALLBACK))
    return fail(err, errlen, "unk", "missing (needed without byte fallback)");
  for (int b = 0; b < 256; b++) {
    unsigned char one = (unsigned char)b;
    char hex[8];
    snprintf(hex, sizeof hex, "<0x%02X>", b);
    t->byte_id[b] = t->kind == KILN_TOK_BYTE_BPE ? kiln_tok_lookup(t, &one, 1) : kiln_tok_lookup(t, (const unsigned char *)hex, 6);
    if (t->byte_id[b] < 0 && (t->kind == KILN_TOK_BYTE_BPE || (t->flags & KILN_TOKF_BYTE_FALLBACK)))
      return fail(err, errlen, "vocabulary", "lacks a byte piece");
  }
  return 0;
}

/* Header, fields, then one block: the tables as host integers, the hashes, the sort
 * scratch of the added tokens, the text; then every table checked and indexed. */
int kiln_tok_load(kiln_tok *t, const void *data, size_t size, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  const unsigned char *p = data;
  if (check_header(p, size, err, errlen) != 0) return -1;
  size_t plen = size - KILN_TOK_HEADER, text_at = 0;
  uint32_t head[KILN_TOK_FIELDS];
  for (int k = 0; k < KILN_TOK_FIELDS && 4 * (size_t)(k + 1) <= plen; k++) head[k] = (uint32_t)get_le(p + KILN_TOK_HEADER + 4 * k, 4);
  if (read_fields(t, head, plen, &text_at, err, errlen) != 0) return -1;
  t->hash_mask = mask_for((uint32_t)t->n);
  t->merge_mask = mask_for((uint32_t)t->n_merges);
  size_t words = text_at / 4, hashes = (size_t)t->hash_mask + 1 + t->merge_mask + 1;
  size_t total = 4 * (words + hashes + 4 * (size_t)t->n_added) + (plen - text_at);
  uint32_t *mem = malloc(total);
  if (!mem) return fail(err, errlen, "memory", "out of memory");
  t->mem = mem;
  /* the tables as host integers, whatever the host's byte order */
  for (size_t k = 0; k < words; k++) mem[k] = (uint32_t)get_le(p + KILN_TOK_HEADER + 4 * k, 4);
  t->off = mem + KILN_TOK_FIELDS;
  t->merges = t->off + t->n + 1;
  t->added = t->merges + 3 * (size_t)t->n_merges;
  t->piece_hash = (int32_t *)(mem + words);
  t->merge_hash = t->piece_hash + t->hash_mask + 1;
  uint32_t *tmp = (uint32_t *)(t->merge_hash + t->merge_mask + 1);
  unsigned char *text = (unsigned char *)(tmp + 4 * (size_t)t->n_added);
  memcpy(text, p + KILN_TOK_HEADER + text_at, plen - text_at);
  t->text = text;
  if (check_tables(t, plen - text_at, err, errlen) != 0 || (sort_added(t, (uint32_t *)t->added, tmp, t->n_added), 0) ||
      build_index(t, err, errlen) != 0) {
    kiln_tok_free(t);
    return -1;
  }
  return 0;
}

/* Frees the one block; t is zeroed (freeing twice is harmless). */
void kiln_tok_free(kiln_tok *t) {
  free(t->mem);
  memset(t, 0, sizeof *t);
}

/* ---- encoding ---- */

size_t kiln_tok_work_size(const kiln_tok *t, size_t len) {
  /* the layout: kiln_tok_internal.h; NFC text is at most three times as long */
  return (t->flags & KILN_TOKF_NFC) ? KILN_TOK_NFC_AREA(len) + KILN_TOK_WORK(3 * len + 8) : KILN_TOK_WORK(len);
}

/* The length of the added token at s[0..n) (its id in *id, its flags in *flags: 1
 * special, 2 lstrip, 4 rstrip), longest first, or 0. */
static size_t match_added(const kiln_tok *t, const unsigned char *s, size_t n, int *id, int *flags) {
  for (int k = t->added_at[s[0]]; k < t->added_at[s[0] + 1]; k++) {
    const uint32_t *a = t->added + 4 * k;
    if (a[3] <= n && memcmp(t->text + a[2], s, a[3]) == 0) return *id = (int)a[0], *flags = (int)a[1], a[3];
  }
  return 0;
}

/* Encodes s[0..len), a text free of added tokens, with t's kind. */
static int encode_segment(const kiln_tok *t, const unsigned char *s, size_t len, int first, int *ids, int *n, int max, void *work) {
  if (len == 0) return 0;
  if (t->kind == KILN_TOK_BYTE_BPE && (t->flags & KILN_TOKF_NFC)) {
    unsigned char *norm = work;
    uint32_t *cps = (uint32_t *)(norm + (3 * (len + 8) + 7) / 8 * 8);
    size_t m = kiln_tok_nfc(s, len, cps, norm);
    return kiln_tok_encode_bytelevel(t, norm, m, ids, n, max, (char *)work + KILN_TOK_NFC_AREA(len));
  }
  if (t->kind == KILN_TOK_BYTE_BPE) return kiln_tok_encode_bytelevel(t, s, len, ids, n, max, work);
  if (t->kind == KILN_TOK_SPM_BPE) return kiln_tok_encode_spm(t, s, len, first, ids, n, max, work);
  return kiln_tok_encode_wordpiece(t, s, len, ids, n, max, work);
}

/* True when the character ending just before s + e (s <= that character) is White_Space;
 * its start in *start. */
static int space_before(const unsigned char *s, size_t lo, size_t e, size_t *start) {
  size_t b = e - 1;
  while (b > lo && e - b < 4 && (s[b] & 0xc0) == 0x80) b--;
  uint32_t cp;
  if ((size_t)kiln_tok_utf8(s + b, e - b, &cp) != e - b) return 0;
  *start = b;
  return kiln_tok_uclass(cp) == KILN_UC_SPACE;
}

/* The length of the White_Space character at s + i (i <= len), or 0. */
static size_t space_at(const unsigned char *s, size_t len, size_t i) {
  uint32_t cp;
  if (i >= len) return 0;
  int cl = kiln_tok_utf8(s + i, len - i, &cp);
  return kiln_tok_uclass(cp) == KILN_UC_SPACE ? (size_t)cl : 0;
}

/* Added tokens first (leftmost-longest at each byte), each stretch between them through
 * the kind's encoder; a token that strips (lstrip, rstrip) takes the spaces beside it. */
int kiln_tok_encode(const kiln_tok *t, const char *text, size_t len, int *ids, int max_ids, void *work) {
  const unsigned char *s = (const unsigned char *)text;
  int n = 0;
  size_t seg = 0;
  for (size_t i = 0; i < len;) {
    int id, flags;
    size_t alen = match_added(t, s + i, len - i, &id, &flags), e = i, b;
    if (!alen) {
      i++;
      continue;
    }
    while ((flags & 2) && e > seg && space_before(s, seg, e, &b)) e = b;
    if (encode_segment(t, s + seg, e - seg, seg == 0, ids, &n, max_ids, work) != 0 || n >= max_ids) return -1;
    ids[n++] = id;
    i += alen;
    for (size_t w; (flags & 4) && (w = space_at(s, len, i)) > 0;) i += w;
    seg = i;
  }
  if (encode_segment(t, s + seg, len - seg, seg == 0, ids, &n, max_ids, work) != 0) return -1;
  return n;
}

/* ---- decoding ---- */

void kiln_tok_stream_init(kiln_tok_stream *s) { memset(s, 0, sizeof *s); }

size_t kiln_tok_decode_max(const kiln_tok *t) { return 3 * ((size_t)t->max_piece + 8); }

/* U+FFFD for one bad byte. */
static int replacement(char *out) {
  memcpy(out, "\xef\xbf\xbd", 3);
  return 3;
}

/* How many of p[0..n) (n >= 1) begin a well-formed UTF-8 character: the length of the
 * character when complete, else of its longest valid prefix (0: p[0] starts none). *need
 * is the character's full length. The second byte's range depends on the first (no
 * overlong forms, surrogates, or code points past U+10FFFF), as the Unicode standard's
 * Table 3-7 has it. */
static int valid_prefix(const unsigned char *p, int n, int *need) {
  unsigned c = p[0];
  *need = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
  if (*need == 0) return 0;
  int k = 1;
  for (; k < n && k < *need; k++) {
    unsigned lo = 0x80, hi = 0xbf;
    if (k == 1) lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (p[k] < lo || p[k] > hi) break;
  }
  return k;
}

/* Emits from s->pending what forms whole characters; a maximal subpart that cannot
 * become one (a bad byte, or a character's valid start cut short) is one U+FFFD, as
 * Unicode's "substitution of maximal subparts" (and so Python's and Rust's lossy UTF-8
 * decoding, which Hugging Face's decoders use) has it; keeps a prefix that may still
 * become a character. */
static int drain(kiln_tok_stream *s, char *out) {
  int w = 0;
  while (s->npending) {
    int need, k = valid_prefix(s->pending, s->npending, &need);
    if (k > 0 && k == need) memcpy(out + w, s->pending, (size_t)k), w += k;   /* a whole character */
    else if (k == s->npending) return w;                              /* wait for the rest */
    else w += replacement(out + w), k = k ? k : 1;
    memmove(s->pending, s->pending + k, (size_t)(s->npending - k));
    s->npending -= k;
  }
  return w;
}

/* Feeds bytes p[0..len) through the stream. */
static int feed(const kiln_tok *t, kiln_tok_stream *s, const unsigned char *p, size_t len, char *out) {
  int w = 0;
  for (size_t i = 0; i < len; i++) {
    if (s->emitted++ == 0 && p[i] == ' ' && (t->flags & KILN_TOKF_STRIP_LEADING)) continue;
    s->pending[s->npending++] = p[i];
    w += drain(s, out + w);
  }
  return w;
}

/* The value of an uppercase hex digit, or -1 (pieces spell bytes <0x0A>). */
static int hexval(unsigned char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

/* A byte piece <0xNN> (SentencePiece) is its byte; a WordPiece piece is "##" joined or
 * space separated; anything else is its bytes; all through the UTF-8 stream. */
int kiln_tok_decode(const kiln_tok *t, kiln_tok_stream *s, int id, char *out) {
  if (id < 0 || id >= t->n) return -1;
  size_t len;
  const unsigned char *p = piece(t, id, &len);
  if (t->kind == KILN_TOK_SPM_BPE && len == 6 && memcmp(p, "<0x", 3) == 0) {
    int hi = hexval(p[3]), lo = hexval(p[4]);
    if (hi >= 0 && lo >= 0 && p[5] == '>' && t->byte_id[hi * 16 + lo] == id) {
      unsigned char b = (unsigned char)(hi * 16 + lo);
      return feed(t, s, &b, 1, out);
    }
  }
  if (t->kind == KILN_TOK_WORDPIECE) {
    int w = 0;
    if (len > 2 && memcmp(p, "##", 2) == 0) p += 2, len -= 2;
    else if (s->emitted) w = feed(t, s, (const unsigned char *)" ", 1, out);
    return w + feed(t, s, p, len, out + w);
  }
  return feed(t, s, p, len, out);
}

/* Bytes still held are the valid start of a character cut short: one U+FFFD. */
int kiln_tok_decode_flush(kiln_tok_stream *s, char *out) {
  int w = s->npending ? replacement(out) : 0;
  s->npending = 0;
  return w;
}
