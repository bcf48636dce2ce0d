/*
 * weights.c — the weights blob, <m>.weights: a 64-byte header, then the payload.
 *
 * The payload is Graph.weights_size bytes; every live WEIGHT and CONST node's bytes
 * sit at its memplan offset (64-byte aligned), the gaps are zero. The header is
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

#include <string.h>

enum { WEIGHTS_VERSION = 1 };

/* Stores the low n bytes of v little-endian, so the blob is the same on any host. */
static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Copies every live WEIGHT/CONST of g to its memplan offset in payload (size bytes). Dies
 * if a tensor is misaligned, does not fit, or (entries sharing a slot) differs from
 * what another entry put there: memplan bugs. */
static void put_graph(Graph *g, unsigned char *payload, const bool *filled, bool *fill, int64_t size) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->region != REG_WEIGHTS || (n->op != OP_WEIGHT && n->op != OP_CONST)) continue;
    int64_t bytes = node_bytes(n);
    if (n->offset % KILN_ALIGN || n->offset < 0 || n->offset + bytes > size)
      die("weights: %%%d at offset %lld (%lld bytes) breaks the layout (payload %lld)", n->id, (long long)n->offset,
          (long long)bytes, (long long)size);
    if (!n->data) die("weights: %%%d (%s) has no data", n->id, n->name ? n->name : kiln_ops[n->op].name);
    int64_t slot = n->offset / KILN_ALIGN;
    if (filled && filled[slot] && memcmp(payload + n->offset, n->data, (size_t)bytes) != 0)
      die("weights: %%%d (%s) of entry %s differs from the tensor sharing its offset %lld", n->id,
          n->name ? n->name : kiln_ops[n->op].name, g->entry ? g->entry : "?", (long long)n->offset);
    memcpy(payload + n->offset, n->data, (size_t)bytes);
    if (fill) fill[slot] = true;
  }
}

/* The file around a payload: header + payload into out, *checksum its FNV-1a 64. */
static void put_file(Buf *out, const unsigned char *payload, int64_t size, uint64_t *checksum) {
  *checksum = kiln_fnv1a64(payload, (size_t)size);
  unsigned char hdr[KILN_ALIGN] = {0};
  memcpy(hdr, "KILNWGT1", 8);
  put_le(hdr + 8, WEIGHTS_VERSION, 4);
  put_le(hdr + 12, KILN_ALIGN, 4);
  put_le(hdr + 16, (uint64_t)size, 8);
  put_le(hdr + 24, *checksum, 8);
  buf_put(out, hdr, sizeof hdr);
  buf_put(out, payload, (size_t)size);
}

/* Contract: out gets header + payload; *checksum the payload's FNV-1a 64. Dies if a
 * planned tensor is misaligned or does not fit the payload (a memplan bug). */
void weights_blob(Graph *g, Buf *out, uint64_t *checksum) {
  int64_t size = g->weights_size;
  if (size < 0 || size % KILN_ALIGN) die("weights: payload size %lld is not a multiple of %d", (long long)size, KILN_ALIGN);
  unsigned char *payload = kiln_alloc((size_t)size + 1);
  put_graph(g, payload, NULL, NULL, size);
  put_file(out, payload, size, checksum);
}

/* Contract in kiln.h: the one payload of every entry (a shared tensor is written by
 * each entry using it, and must be the same bytes each time). */
void program_weights_blob(Program *p, Buf *out, uint64_t *checksum) {
  int64_t size = p->weights_size;
  if (size < 0 || size % KILN_ALIGN) die("weights: payload size %lld is not a multiple of %d", (long long)size, KILN_ALIGN);
  unsigned char *payload = kiln_alloc((size_t)size + 1);
  bool *filled = kiln_alloc((size_t)(size / KILN_ALIGN) + 1), *now = kiln_alloc((size_t)(size / KILN_ALIGN) + 1);
  for (int e = 0; e < p->nentries; e++) {
    put_graph(p->entries[e], payload, filled, now, size);
    memcpy(filled, now, (size_t)(size / KILN_ALIGN) + 1);
  }
  put_file(out, payload, size, checksum);
}
