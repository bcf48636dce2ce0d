/*
 * weights.c — the weights blob, <m>.weights: a 64-byte header, then the payload.
 *
 * The payload is the program's weights_size bytes; every live WEIGHT and CONST node's
 * bytes sit at its memplan offset (64-byte aligned), the gaps are zero. A weight is
 * made here, one tensor at a time (weight.c: materialised from its file or seed, packed
 * by node_panels or quantized by node_stored, written, freed). It is streamed to the
 * file, never assembled in memory (a 1B-parameter model's payload is 4 GB): the header
 * is written last, once the payload's checksum is known. The header is
 * written byte by byte in little-endian order so the file is the same on every
 * host:
 *
 *   0  "KILNWGT1"        magic, 8 bytes
 *   8  u32 version = 1   12  u32 header_size = 64
 *   16 u64 payload_size  24  u64 FNV-1a 64 of the payload
 *   32 zero up to 64
 *
 * runtime/kiln_runtime.c validates exactly this layout; docs/output.md documents it.
 */
#include "kiln.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { WEIGHTS_VERSION = 1 };

/* Stores the low n bytes of v little-endian, so the blob is the same on any host. */
static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The tensors of the payload in offset order, one per slot: a tensor several entries
 * share is taken once, after checking every copy holds the same bytes. Dies if a tensor
 * is misaligned, overlaps the next or does not fit (memplan bugs). */
typedef struct {
  const Node **n;
  int count;
} Layout;

static int by_offset(const void *a, const void *b) {
  const Node *x = *(const Node *const *)a, *y = *(const Node *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return 0;
}

static const char *what(const Node *n) { return n->name ? n->name : kiln_ops[n->op].name; }

/* Whether leaves a and b hold the same values: copies of one parameter share their source
 * (comparing them would materialise both), constants are compared. */
static bool same_values(const Node *a, const Node *b) {
  if (a->op != b->op) return false;
  if (a->src == b->src && a->data == b->data) return true;
  if (a->src || b->src) return false;
  return memcmp(a->data, b->data, (size_t)node_bytes(a)) == 0;
}

static Layout layout(Graph *const *gs, int ng, int64_t size) {
  if (size < 0 || size % KILN_ALIGN) die("weights: payload size %lld is not a multiple of %d", (long long)size, KILN_ALIGN);
  int total = 0;
  for (int e = 0; e < ng; e++) total += gs[e]->nnodes;
  const Node **all = kiln_alloc(sizeof *all * (size_t)(total + 1));
  int n = 0;
  for (int e = 0; e < ng; e++)
    for (int i = 0; i < gs[e]->nnodes; i++) {
      const Node *x = gs[e]->nodes[i];
      if (x->dead || x->region != REG_WEIGHTS || (x->op != OP_WEIGHT && x->op != OP_CONST)) continue;
      if (x->offset % KILN_ALIGN || x->offset < 0 || x->offset + node_stored_bytes(x) > size)
        die("weights: %%%d at offset %lld (%lld bytes) breaks the layout (payload %lld)", x->id, (long long)x->offset,
            (long long)node_stored_bytes(x), (long long)size);
      if (!x->data && !(x->op == OP_WEIGHT && x->src)) die("weights: %%%d (%s) has no data", x->id, what(x));
      all[n++] = x;
    }
  /* qsort is not stable: equal offsets are copies of one tensor, checked equal below, so
   * which copy is kept cannot change a byte. */
  qsort(all, (size_t)n, sizeof *all, by_offset);
  Layout l = {all, 0};
  for (int i = 0; i < n; i++) {
    const Node *x = all[i], *prev = l.count ? l.n[l.count - 1] : NULL;
    if (prev && prev->offset == x->offset) {
      if (node_bytes(prev) != node_bytes(x) || prev->pack != x->pack || prev->pack_t != x->pack_t || prev->wino != x->wino ||
          prev->wfmt != x->wfmt || !same_values(prev, x))
        die("weights: %s and %s share offset %lld with different bytes", what(prev), what(x), (long long)x->offset);
      continue;
    }
    if (prev && prev->offset + node_stored_bytes(prev) > x->offset)
      die("weights: %s overlaps %s at offset %lld", what(prev), what(x), (long long)x->offset);
    l.n[l.count++] = x;
  }
  return l;
}

/* Where the payload's bytes go, in order: a hash, a file or a buffer. */
typedef struct {
  uint64_t h;                   /* FNV-1a 64 of everything so far */
  uint64_t t;                   /* FNV-1a 64 of the current tensor's bytes (json.c's per-tensor fnv1a64) */
  FILE *f;                      /* or NULL */
  const char *path;
  Buf *buf;                     /* or NULL */
} Sink;

static void sink_put(Sink *s, const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = s->h, t = s->t;   /* two independent chains: the second costs almost nothing */
  for (size_t i = 0; i < n; i++) {
    h = (h ^ b[i]) * 0x100000001b3ULL;
    t = (t ^ b[i]) * 0x100000001b3ULL;
  }
  s->h = h, s->t = t;
  if (s->f && n && fwrite(p, 1, n, s->f) != n) kiln_error("cannot write %s: %s", s->path, strerror(errno));
  if (s->buf) buf_put(s->buf, p, n);
}

static void sink_zeros(Sink *s, int64_t n) {
  static const unsigned char zero[4096];
  for (; n > 0; n -= (int64_t)sizeof zero) sink_put(s, zero, n < (int64_t)sizeof zero ? (size_t)n : sizeof zero);
}

static const uint64_t fnv_basis = 0xcbf29ce484222325ULL;   /* FNV-1a 64's offset basis (kiln_fnv1a64) */

/* The payload of size bytes through s: each tensor at its offset, zeros between. Each
 * weight is made (materialised, packed or quantized) as it is reached and freed after,
 * so one tensor is resident at a time; its own hash is kept for json.c. */
static void payload(const Layout *l, int64_t size, Sink *s) {
  int64_t at = 0;
  for (int i = 0; i < l->count; i++) {
    sink_zeros(s, l->n[i]->offset - at);
    const Node *x = l->n[i];
    bool owned;
    const void *bytes = node_stored(x, &owned);
    s->t = fnv_basis;
    sink_put(s, bytes, (size_t)node_stored_bytes(x));
    if (owned) free((void *)bytes);
    if (x->op == OP_WEIGHT && x->src) {
      x->src->stored_fnv = s->t;
      x->src->hashed = true;
    }
    node_release(x);
    at = x->offset + node_stored_bytes(x);
    if (s->f) kiln_progress("writing weights", at, size);
  }
  sink_zeros(s, size - at);
  if (s->f) kiln_progress("writing weights", size, size);
}

static void header(unsigned char hdr[KILN_ALIGN], int64_t size, uint64_t checksum) {
  memset(hdr, 0, KILN_ALIGN);
  memcpy(hdr, "KILNWGT1", 8);
  put_le(hdr + 8, WEIGHTS_VERSION, 4);
  put_le(hdr + 12, KILN_ALIGN, 4);
  put_le(hdr + 16, (uint64_t)size, 8);
  put_le(hdr + 24, checksum, 8);
}

/* Contract in kiln.h: the checksum without building the payload. */
uint64_t weights_checksum(Graph *const *gs, int ng, int64_t size) {
  Program *p = ng ? gs[0]->prog : NULL;
  if (p && p->checksummed) return p->weights_checksum;   /* hashing gigabytes twice is seconds */
  Layout l = layout(gs, ng, size);
  Sink s = {fnv_basis, fnv_basis, NULL, NULL, NULL};
  payload(&l, size, &s);
  return s.h;
}

/* Contract in kiln.h: streams header + payload to dir/name in one pass over the tensors,
 * never holding the payload: the header goes out with a zero checksum, the payload is
 * hashed as it is written, then the header is rewritten with the checksum. */
uint64_t weights_write(Graph *const *gs, int ng, int64_t size, const char *dir, const char *name) {
  Layout l = layout(gs, ng, size);
  unsigned char hdr[KILN_ALIGN];
  header(hdr, size, 0);
  char *path = kiln_fmt("%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) kiln_error("cannot write %s: %s", path, strerror(errno));
  if (fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr) kiln_error("cannot write %s: %s", path, strerror(errno));
  Sink w = {fnv_basis, fnv_basis, f, path, NULL};
  payload(&l, size, &w);
  header(hdr, size, w.h);
  if (ng && gs[0]->prog) {
    gs[0]->prog->weights_checksum = w.h;
    gs[0]->prog->checksummed = true;
  }
  if (fseek(f, 0, SEEK_SET) != 0 || fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr || fclose(f) != 0)
    kiln_error("cannot write %s: %s", path, strerror(errno));
  return w.h;
}

/* Contract in kiln.h: header + payload into out (for --embed-weights, which needs the bytes). */
uint64_t weights_blob(Graph *const *gs, int ng, int64_t size, Buf *out) {
  uint64_t sum = weights_checksum(gs, ng, size);
  unsigned char hdr[KILN_ALIGN];
  header(hdr, size, sum);
  buf_put(out, hdr, sizeof hdr);
  Layout l = layout(gs, ng, size);
  Sink s = {fnv_basis, fnv_basis, NULL, NULL, out};
  payload(&l, size, &s);
  return sum;
}
