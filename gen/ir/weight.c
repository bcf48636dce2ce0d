/*
 * weight.c — a WEIGHT's values, made when something needs them and freed after.
 *
 * A 1B-parameter model is 4 GB of f32. Tracing does not copy it: a WEIGHT node records
 * where its values come from (Node.src: a tensor of a loaded file, whose bytes stay in
 * the read-only mapping of the file, or the seeded initialiser, which regenerates them
 * bit for bit from seed and name), and the passes that change how a weight is stored
 * record the change (pass_pack: Node.pack; pass_quant: Node.wfmt) without applying it.
 * The weights writer then takes the tensors one at a time: node_stored makes one's
 * payload bytes (packed or quantized, reading a file's tensor a few rows at a time:
 * weight_rows, which drops the file's pages as it goes), the writer streams them out,
 * and node_release frees what was made. So the build holds about one tensor (in its
 * stored form) at a time, never the model.
 *
 * Code that really needs values — the interpreter (`kiln run`), Core ML's encodings —
 * calls node_data, which caches them in the shared WeightSrc until
 * node_release. The values node_data gives after pass_quant are those of the stored
 * format (quant_pack's dequantized values), exactly what the kernels compute with.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

/* count elements of file tensor t starting at its bytes p as f32: a safetensors dtype
 * widened exactly, a GGUF type decoded by gguf.c. */
static void decode(const SafeTensor *t, const unsigned char *p, int64_t count, float *out) {
  if (!t->loads) die("weight.c: %s (%s) is not loadable", t->name, t->file_dtype);
  if (t->ggml_type >= 0) {
    gguf_to_f32(t->ggml_type, p, count, out);
    return;
  }
  bool f32 = strcmp(t->file_dtype, "F32") == 0, f16 = strcmp(t->file_dtype, "F16") == 0;
  for (int64_t i = 0; i < count; i++) {
    if (f32) {
      const unsigned char *q = p + 4 * i;
      out[i] = kiln_f32_from_bits((uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24);
    } else {
      uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
      out[i] = f16 ? kiln_f16_to_f32(h) : kiln_bf16_to_f32(h);
    }
  }
}

/* Contract in kiln.h. */
void safetensor_f32(const SafeTensor *t, float *out) { decode(t, t->bytes, shape_numel(&t->shape), out); }

/* Bytes of t's first `count` elements in the file (count a whole number of its blocks). */
static int64_t tensor_bytes(const SafeTensor *t, int64_t count) {
  if (t->ggml_type >= 0) return gguf_tensor_bytes(t->ggml_type, count);
  return count * (strcmp(t->file_dtype, "F32") == 0 ? 4 : 2);
}

/* Contract in kiln.h: the tensor's bytes (a GGUF one's in its ggml type's size). */
void safetensor_drop(const SafeTensor *t) {
  if (t->mapped) kiln_drop_pages(t->bytes, (size_t)tensor_bytes(t, shape_numel(&t->shape)));
}

/* Contract in kiln.h. */
bool weight_has_rows(const Node *n) {
  return n->op == OP_WEIGHT && n->shape.rank == 2 && (n->data || (n->src && n->src->file));
}

/* Contract in kiln.h. A file's rows are decoded from their own bytes (a ggml row is whole
 * blocks), whose pages are dropped right after. */
void weight_rows(const Node *n, int64_t r0, int64_t nr, float *out) {
  int64_t k = n->shape.dim[1];
  if (!weight_has_rows(n) || r0 < 0 || nr < 0 || r0 + nr > n->shape.dim[0]) die("weight_rows: %s rows %lld+%lld", n->name, (long long)r0, (long long)nr);
  if (n->data) {
    memcpy(out, (const float *)n->data + r0 * k, sizeof(float) * (size_t)(nr * k));
    return;
  }
  const SafeTensor *t = n->src->file;
  const unsigned char *p = t->bytes + tensor_bytes(t, r0 * k);
  decode(t, p, nr * k, out);
  if (t->mapped) kiln_drop_pages(p, (size_t)tensor_bytes(t, nr * k));
}

/* Contract in kiln.h. A weight given values outright (Node.data: `kiln run --quantize`)
 * is copied; one from a file is decoded, after which its file pages are dropped. */
float *weight_load(const Node *n) {
  int64_t count = node_numel(n);
  size_t bytes = sizeof(float) * (size_t)(count ? count : 1);
  float *out = malloc(bytes);
  if (!out) die("out of memory loading weight %s (%zu bytes)", n->name ? n->name : "?", bytes);
  const WeightSrc *s = n->src;
  if (n->data) {
    memcpy(out, n->data, sizeof(float) * (size_t)count);
  } else if (!s) {
    die("weight %%%d (%s) has neither data nor a source", n->id, n->name ? n->name : "?");
  } else if (s->file && weight_has_rows(n)) {   /* a few MB at a time: the file's pages go as they are read */
    int64_t rows = n->shape.dim[0], k = n->shape.dim[1], step = k ? (((int64_t)1 << 20) + k - 1) / k : rows;
    for (int64_t r = 0; r < rows; r += step) weight_rows(n, r, rows - r < step ? rows - r : step, out + r * k);
  } else if (s->file) {
    safetensor_f32(s->file, out);
    safetensor_drop(s->file);
  } else {
    init_fill(out, count, s->seed, s->name, s->kind, s->a, s->b);
  }
  return out;
}

/* The sources node_data made values for: freed at exit (the arena holding the WeightSrcs
 * is freed after, its atexit handler having been registered first), so leak checkers see
 * a clean exit after `kiln run` or a Core ML build, which keep the values they read. */
static WeightSrc **cached;
static int ncached, capcached;

static void free_cached(void) {
  for (int i = 0; i < ncached; i++) {
    free(cached[i]->values);
    cached[i]->values = NULL;
  }
  free(cached);
  cached = NULL, ncached = capcached = 0;
}

static void remember(WeightSrc *s) {
  if (s->listed) return;
  if (ncached == capcached) {
    if (!cached) atexit(free_cached);
    capcached = capcached ? 2 * capcached : 64;
    WeightSrc **v = realloc(cached, sizeof *v * (size_t)capcached);
    if (!v) die("out of memory");
    cached = v;
  }
  cached[ncached++] = s;
  s->listed = true;
}

/* Contract in kiln.h. The cache is keyed by the format whose values it holds, so values
 * made before pass_quant chose a format are made again after it. */
const void *node_data(const Node *n) {
  WFormat f = n->op == OP_WEIGHT ? n->wfmt : WF_F32;
  bool requant = f != WF_F32 && f != n->src_fmt;
  if (n->op != OP_WEIGHT || (n->data && !requant)) return n->data;
  WeightSrc *s = n->src;
  if (!s) die("weight %%%d (%s) has no source to hold its %s values", n->id, n->name ? n->name : "?", wformat_info(f)->name);
  if (s->values && s->values_fmt == f) return s->values;
  free(s->values);
  s->values = weight_load(n);
  s->values_fmt = f;
  remember(s);
  if (requant) {   /* a file's own format already decodes to its values */
    int64_t bytes = wformat_bytes(f, n->shape.dim[0], n->shape.dim[1]);
    unsigned char *q = calloc(1, (size_t)(bytes ? bytes : 1));   /* padding lanes stay zero */
    if (!q) die("out of memory quantizing %s (%lld bytes)", n->name, (long long)bytes);
    free(quant_pack_into(f, s->values, n->shape.dim[0], n->shape.dim[1], s->values, q));
  }
  return s->values;
}

/* Contract in kiln.h. */
void node_release(const Node *n) {
  if (n->op != OP_WEIGHT || !n->src) return;
  free(n->src->values);
  n->src->values = NULL;
  if (n->src->file) safetensor_drop(n->src->file);
}
