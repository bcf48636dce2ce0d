/*
 * gguf.c — reads and validates a GGUF file (llama.cpp's model format, version 3 and 2)
 * into the same SafeFile the safetensors reader gives: named tensors widened to f32,
 * plus the file's metadata keys.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 key count; the
 * keys, each a string, a u32 value type and a value (arrays: u32 element type, u64
 * count, the elements); the tensor infos, each a string name, u32 n_dims, n_dims u64
 * dims (fastest first: ggml's ne[0] is numpy's last axis, so the shape is reversed),
 * u32 ggml type and u64 offset; padding to general.alignment (default 32); the data.
 * A string is a u64 length and that many bytes (no NUL).
 *
 * Checked: every count and length against the bytes left (so a lying count cannot
 * make us allocate more than the file's size), keys and tensor names unique and free
 * of control bytes, names at most 64 bytes (GGML_MAX_NAME), 1 to 4 dims, each >= 1,
 * offsets aligned, each tensor's bytes inside the data section and no two overlapping,
 * a quantized row a whole number of blocks. Tensor types whose byte size we know but do
 * not load (I32, Q5_K, ...) are validated and marked not loadable, as safetensors.c does for
 * I64; a type whose size we do not know refuses the file, since its bounds cannot be
 * checked.
 *
 * Dequantization follows ggml's reference definitions (ggml-quants.c, MIT) with the
 * same order of float operations, each separately rounded, so the f32 values are those
 * llama.cpp's own dequantize_row_* computes: Q8_0 and Q4_0 (blocks of 32, one f16
 * scale), Q4_K (super-blocks of 256: f16 d and dmin, 6-bit scales and mins of 8
 * sub-blocks) and Q6_K (256: 4+2-bit quants, 16 int8 scales, f16 d).
 *
 * Errors: "path: header: problem", "path: key 'k': problem" or "path: tensor 'name': problem".
 */
#include "kiln.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Dequantization must round each product and sum separately, as ggml's reference does:
 * no fused multiply-add, whatever the compiler's default. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF   /* gcc needs none: ISO C mode (-std=c11) turns contraction off */
#endif

enum {
  GGUF_MAGIC = 0x46554747,      /* "GGUF" read as a little-endian u32 */
  GGUF_DEFAULT_ALIGNMENT = 32,
  GGUF_MAX_ALIGNMENT = 1 << 20,
  GGUF_MAX_NAME = 64,           /* bytes of a tensor name, GGML_MAX_NAME */
  GGUF_MAX_DIMS = 4,
  GGUF_MAX_NESTING = 8,         /* arrays of arrays: the spec allows them, we bound them */
  QK = 32,                      /* elements of a Q8_0 / Q4_0 block */
  QK_K = 256,                   /* elements of a K-quant super-block */
};

/* The GGUF metadata value types, numbered as the format numbers them. */
enum { GV_U8, GV_I8, GV_U16, GV_I16, GV_U32, GV_I32, GV_F32, GV_BOOL, GV_STR, GV_ARR, GV_U64, GV_I64, GV_F64, GV__COUNT };
static const int gv_size[GV__COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};   /* 0: variable */

/* The ggml tensor types Kiln knows the size of: elements per block, bytes per block. */
typedef struct {
  int id;
  const char *name;
  int block, bytes;
  bool loads;                   /* dequantized to f32 by this reader */
} GgmlType;
static const GgmlType ggml_types[] = {
    {0, "F32", 1, 4, true},      {1, "F16", 1, 2, true},       {2, "Q4_0", QK, 18, true},
    {3, "Q4_1", QK, 20, false},  {6, "Q5_0", QK, 22, false},   {7, "Q5_1", QK, 24, false},
    {8, "Q8_0", QK, 34, true},   {9, "Q8_1", QK, 36, false},   {10, "Q2_K", QK_K, 84, false},
    {11, "Q3_K", QK_K, 110, false}, {12, "Q4_K", QK_K, 144, true}, {13, "Q5_K", QK_K, 176, false},
    {14, "Q6_K", QK_K, 210, true}, {15, "Q8_K", QK_K, 292, false}, {24, "I8", 1, 1, false},
    {25, "I16", 1, 2, false},    {26, "I32", 1, 4, false},     {27, "I64", 1, 8, false},
    {28, "F64", 1, 8, false},    {30, "BF16", 1, 2, true},
};

static const GgmlType *ggml_type(uint32_t id) {
  for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
    if ((uint32_t)ggml_types[i].id == id) return &ggml_types[i];
  return NULL;
}

/* A cursor over the file, with the error it stopped on. */
typedef struct {
  const char *path;
  const unsigned char *p, *end, *all;
  char *err;
  size_t errlen;
  bool failed;
} Reader;

static bool rfail(Reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool rfail(Reader *r, const char *fmt, ...) {
  if (r->failed) return false;
  r->failed = true;
  va_list ap;
  va_start(ap, fmt);
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->errlen, "%s: %s", r->path, msg);
  return false;
}

static size_t left(const Reader *r) { return (size_t)(r->end - r->p); }

/* n bytes little-endian into *out; a short file is "truncated at byte N (what)". */
static bool rd_le(Reader *r, int n, uint64_t *out, const char *what) {
  *out = 0;
  if (left(r) < (size_t)n) return rfail(r, "truncated at byte %zu (%s)", (size_t)(r->p - r->all), what);
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | r->p[i];
  r->p += n;
  *out = v;
  return true;
}

static bool rd_u32(Reader *r, uint32_t *out, const char *what) {
  uint64_t v;
  *out = 0;
  if (!rd_le(r, 4, &v, what)) return false;
  *out = (uint32_t)v;
  return true;
}

/* A string: its bytes copied and NUL-terminated; *len gets its length (it may hold NULs). */
static bool rd_str(Reader *r, const char **out, size_t *len, const char *what) {
  uint64_t n;
  if (!rd_le(r, 8, &n, what)) return false;
  if (n > left(r)) return rfail(r, "%s: string length %llu runs past the end of the file", what, (unsigned long long)n);
  char *s = kiln_alloc((size_t)n + 1);
  memcpy(s, r->p, (size_t)n);
  r->p += n;
  *out = s;
  if (len) *len = (size_t)n;
  return true;
}

/* A string shown in a message: control bytes escaped, at most 100 bytes. */
static const char *shown(const char *s) {
  char *e = esc_message(s);
  return strlen(e) > 100 ? kiln_fmt("%.100s...", e) : e;
}

static bool has_control(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return true;
  return false;
}

static bool rd_value(Reader *r, uint32_t type, MetaVal *v, const char *key, int depth);

/* An array value: element type, count, elements. A count is checked against the bytes
 * left before anything is allocated (every element takes at least one byte). */
static bool rd_array(Reader *r, MetaVal *v, const char *key, int depth) {
  uint32_t et;
  uint64_t n;
  if (!rd_u32(r, &et, "array type") || !rd_le(r, 8, &n, "array length")) return false;
  if (et >= GV__COUNT) return rfail(r, "key '%s': array of unknown value type %u", shown(key), et);
  if (depth >= GGUF_MAX_NESTING) return rfail(r, "key '%s': arrays nested deeper than %d", shown(key), GGUF_MAX_NESTING);
  uint64_t min = et == GV_STR ? 8 : et == GV_ARR ? 12 : (uint64_t)gv_size[et];
  if (n > left(r) / min)
    return rfail(r, "key '%s': array of %llu elements runs past the end of the file", shown(key), (unsigned long long)n);
  v->kind = MV_ARR;
  v->n = (int64_t)n;
  v->items = kiln_alloc(sizeof(MetaVal) * (size_t)(n ? n : 1));
  for (uint64_t i = 0; i < n; i++)
    if (!rd_value(r, et, &v->items[i], key, depth + 1)) return false;
  return true;
}

static bool rd_value(Reader *r, uint32_t type, MetaVal *v, const char *key, int depth) {
  uint64_t x;
  switch (type) {
  case GV_STR: v->kind = MV_STR; return rd_str(r, &v->s, &v->slen, "string value");
  case GV_ARR: return rd_array(r, v, key, depth);
  case GV_BOOL:
    if (!rd_le(r, 1, &x, "bool value")) return false;
    if (x > 1) return rfail(r, "key '%s': bool value %llu (not 0 or 1)", shown(key), (unsigned long long)x);
    v->kind = MV_BOOL;
    v->b = x == 1;
    return true;
  case GV_F32: case GV_F64:
    if (!rd_le(r, gv_size[type], &x, "float value")) return false;
    v->kind = MV_FLOAT;
    if (type == GV_F32) v->f = kiln_f32_from_bits((uint32_t)x);
    else memcpy(&v->f, &x, sizeof v->f);
    return true;
  default:
    if (!rd_le(r, gv_size[type], &x, "integer value")) return false;
    v->kind = MV_INT;
    int bits = 8 * gv_size[type];
    bool is_signed = type == GV_I8 || type == GV_I16 || type == GV_I32 || type == GV_I64;
    if (is_signed && bits < 64 && (x >> (bits - 1) & 1)) x |= ~(uint64_t)0 << bits;   /* sign-extend */
    if (!is_signed && x > (uint64_t)INT64_MAX) {           /* a u64 past int64: kept as a float */
      v->kind = MV_FLOAT;
      v->f = (double)x;
      return true;
    }
    memcpy(&v->i, &x, sizeof v->i);
    return true;
  }
}

/* ---- dequantization (ggml's reference order of operations) ---- */

static float half_at(const unsigned char *p) { return kiln_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void deq_q8_0(const unsigned char *b, float *y) {
  const float d = half_at(b);
  for (int j = 0; j < QK; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void deq_q4_0(const unsigned char *b, float *y) {
  const float d = half_at(b);
  const unsigned char *qs = b + 2;
  for (int j = 0; j < QK / 2; j++) {
    y[j] = (float)((qs[j] & 0x0f) - 8) * d;
    y[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
  }
}

/* Scale and min of sub-block j of a Q4_K super-block: 6 bits each, packed in 12 bytes. */
static void scale_min_k4(int j, const unsigned char *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
    *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
  }
}

static void deq_q4_k(const unsigned char *b, float *y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const unsigned char *scales = b + 4, *q = b + 16;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
    int sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * (float)sc, m1 = dmin * (float)m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * (float)sc, m2 = dmin * (float)m;
    for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
  }
}

static void deq_q6_k(const unsigned char *b, float *y) {
  const unsigned char *ql = b, *qh = b + 128;
  const signed char *sc = (const signed char *)(b + 192);
  const float d = half_at(b + 208);
  for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; l++) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (qh[l] >> 0 & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (qh[l] >> 2 & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4) - 32;
      y[l] = d * (float)sc[is] * (float)q1;
      y[l + 32] = d * (float)sc[is + 2] * (float)q2;
      y[l + 64] = d * (float)sc[is + 4] * (float)q3;
      y[l + 96] = d * (float)sc[is + 6] * (float)q4;
    }
  }
}

/* Contract in kiln.h: the tensor's n elements widened or dequantized to f32. */
void gguf_to_f32(int type, const unsigned char *p, int64_t n, float *out) {
  const GgmlType *t = ggml_type((uint32_t)type);
  if (!t || !t->loads) die("gguf_to_f32: ggml type %d does not load", type);
  int64_t nb = n / t->block;
  for (int64_t i = 0; i < nb; i++) {
    const unsigned char *b = p + i * t->bytes;
    float *y = out + i * t->block;
    switch (t->id) {
    case 0: *y = kiln_f32_from_bits((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24); break;
    case 1: *y = half_at(b); break;
    case 30: *y = kiln_bf16_to_f32((uint16_t)(b[0] | b[1] << 8)); break;
    case 2: deq_q4_0(b, y); break;
    case 8: deq_q8_0(b, y); break;
    case 12: deq_q4_k(b, y); break;
    case 14: deq_q6_k(b, y); break;
    default: die("ggml type %d marked loadable without a decoder", t->id);
    }
  }
}

/* Contract in kiln.h: bytes of n elements of a loadable ggml type. */
int64_t gguf_tensor_bytes(int type, int64_t n) {
  const GgmlType *t = ggml_type((uint32_t)type);
  return t ? n / t->block * t->bytes : 0;
}

/* ---- the file ---- */

typedef struct {
  uint64_t offset, bytes;
  int index;
} Span;

static int span_cmp(const void *a, const void *b) {
  const Span *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->index - y->index;
}

static bool rd_header_kvs(Reader *r, SafeFile *f, uint64_t nkv, uint64_t *alignment) {
  StrMap keys = {0};
  f->meta = kiln_alloc(sizeof(MetaKV) * (size_t)(nkv + 1));
  for (uint64_t i = 0; i < nkv; i++) {
    MetaKV *kv = &f->meta[f->nmeta];
    size_t klen;
    uint32_t type;
    if (!rd_str(r, &kv->key, &klen, "key")) return false;
    if (!klen) return rfail(r, "header: key %llu is empty", (unsigned long long)i);
    if (has_control(kv->key, klen)) return rfail(r, "key '%s': control bytes in the key", shown(kv->key));
    if (strmap_get(&keys, kv->key)) return rfail(r, "key '%s': appears twice", shown(kv->key));
    *strmap_put(&keys, kv->key) = 1;
    if (!rd_u32(r, &type, "value type")) return false;
    if (type >= GV__COUNT) return rfail(r, "key '%s': unknown value type %u", shown(kv->key), type);
    if (!rd_value(r, type, &kv->v, kv->key, 0)) return false;
    f->nmeta++;
    if (strcmp(kv->key, "general.alignment") == 0) {
      if (type != GV_U32) return rfail(r, "key 'general.alignment': must be a u32");
      uint64_t a = (uint64_t)kv->v.i;
      if (a == 0 || a % 8 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
        return rfail(r, "key 'general.alignment': %llu is not a power of two from 8 to %d", (unsigned long long)a,
                     GGUF_MAX_ALIGNMENT);
      *alignment = a;
    }
  }
  return true;
}

/* One tensor info; *span gets its offset and byte size, *type its ggml type. */
static bool rd_tensor_info(Reader *r, SafeTensor *t, StrMap *names, Span *span, const GgmlType **type) {
  size_t nlen;
  uint32_t ndims, tid;
  if (!rd_str(r, &t->name, &nlen, "tensor name")) return false;
  if (!nlen) return rfail(r, "header: a tensor has an empty name");
  if (has_control(t->name, nlen)) return rfail(r, "tensor '%s': control bytes in the name", shown(t->name));
  if (nlen > GGUF_MAX_NAME) return rfail(r, "tensor '%s': name longer than %d bytes", shown(t->name), GGUF_MAX_NAME);
  if (strmap_get(names, t->name)) return rfail(r, "tensor '%s': appears twice", shown(t->name));
  *strmap_put(names, t->name) = 1;
  if (!rd_u32(r, &ndims, "n_dims")) return false;
  if (ndims < 1 || ndims > GGUF_MAX_DIMS) return rfail(r, "tensor '%s': %u dims (1 to %d)", shown(t->name), ndims, GGUF_MAX_DIMS);
  uint64_t ne[GGUF_MAX_DIMS], numel = 1;
  for (uint32_t d = 0; d < ndims; d++) {
    if (!rd_le(r, 8, &ne[d], "dims")) return false;
    if (ne[d] < 1 || ne[d] > KILN_MAX_NUMEL || numel * ne[d] > KILN_MAX_NUMEL)
      return rfail(r, "tensor '%s': %llu elements along dim %u (each tensor holds at most %d elements)", shown(t->name),
                   (unsigned long long)ne[d], d, KILN_MAX_NUMEL);
    numel *= ne[d];
  }
  t->shape.rank = (int)ndims;
  for (uint32_t d = 0; d < ndims; d++) t->shape.dim[d] = (int64_t)ne[ndims - 1 - d];   /* ne[0] is the last axis */
  if (!rd_u32(r, &tid, "tensor type")) return false;
  *type = ggml_type(tid);
  if (!*type) return rfail(r, "tensor '%s': ggml type %u is not one Kiln knows (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K load)", shown(t->name), tid);
  t->file_dtype = (*type)->name;
  t->dtype = DT_F32;
  if (ne[0] % (uint64_t)(*type)->block)
    return rfail(r, "tensor '%s': a row of %llu elements is not a whole number of %s blocks of %d", shown(t->name),
                 (unsigned long long)ne[0], (*type)->name, (*type)->block);
  span->bytes = numel / (uint64_t)(*type)->block * (uint64_t)(*type)->bytes;
  return rd_le(r, 8, &span->offset, "tensor offset");
}

/* Offsets aligned, bytes inside the data section, no two tensors overlapping. */
static bool check_spans(Reader *r, const SafeFile *f, Span *s, int n, uint64_t data_size, uint64_t alignment) {
  for (int i = 0; i < n; i++) {
    const char *name = shown(f->tensors[s[i].index].name);
    if (s[i].offset % alignment) return rfail(r, "tensor '%s': offset %llu is not a multiple of the alignment %llu", name,
                                              (unsigned long long)s[i].offset, (unsigned long long)alignment);
    if (s[i].offset > data_size || s[i].bytes > data_size - s[i].offset)
      return rfail(r, "tensor '%s': bytes [%llu, %llu) run past the data section (%llu bytes; truncated file?)", name,
                   (unsigned long long)s[i].offset, (unsigned long long)(s[i].offset + s[i].bytes),
                   (unsigned long long)data_size);
  }
  qsort(s, (size_t)n, sizeof *s, span_cmp);
  for (int i = 1; i < n; i++)
    if (s[i].offset < s[i - 1].offset + s[i - 1].bytes)
      return rfail(r, "tensor '%s': bytes overlap those of tensor '%s'", shown(f->tensors[s[i].index].name),
                   shown(f->tensors[s[i - 1].index].name));
  return true;
}

/* Contract in kiln.h: like safetensors_parse, names, shapes, metadata and data are copies. */
SafeFile *gguf_parse(const char *path, const unsigned char *all, size_t size, char *err, size_t errlen) {
  Reader r = {path, all, all + size, all, err, errlen, false};
  uint32_t magic, version;
  uint64_t ntensors, nkv, alignment = GGUF_DEFAULT_ALIGNMENT;
  if (!rd_u32(&r, &magic, "magic")) return NULL;
  if (magic != GGUF_MAGIC) return rfail(&r, "header: not a GGUF file (no \"GGUF\" magic)"), NULL;
  if (!rd_u32(&r, &version, "version")) return NULL;
  if (version != 2 && version != 3) return rfail(&r, "header: GGUF version %u (Kiln reads 2 and 3)", version), NULL;
  if (!rd_le(&r, 8, &ntensors, "tensor count") || !rd_le(&r, 8, &nkv, "key count")) return NULL;
  /* A key takes at least 13 bytes (8 length, 1 byte, 4 type), a tensor info 32. */
  if (nkv > left(&r) / 13) return rfail(&r, "header: %llu keys cannot fit in the file", (unsigned long long)nkv), NULL;
  if (ntensors > left(&r) / 32)
    return rfail(&r, "header: %llu tensors cannot fit in the file", (unsigned long long)ntensors), NULL;
  SafeFile *f = kiln_alloc(sizeof *f);
  f->path = kiln_strdup(path);
  if (!rd_header_kvs(&r, f, nkv, &alignment)) return NULL;
  f->tensors = kiln_alloc(sizeof(SafeTensor) * (size_t)(ntensors + 1));
  Span *spans = kiln_alloc(sizeof(Span) * (size_t)(ntensors + 1));
  const GgmlType **types = kiln_alloc(sizeof *types * (size_t)(ntensors + 1));
  StrMap names = {0};
  for (uint64_t i = 0; i < ntensors; i++) {
    spans[i].index = (int)i;
    if (!rd_tensor_info(&r, &f->tensors[i], &names, &spans[i], &types[i])) return NULL;
    f->ntensors++;
  }
  uint64_t data_start = ((uint64_t)(r.p - all) + alignment - 1) / alignment * alignment;
  /* A file without tensors (llama.cpp's vocabulary-only files) may end right after its
   * tensor infos, without the padding: its data section is empty, as llama.cpp reads it. */
  if (ntensors == 0 && data_start > size) data_start = size;
  if (data_start > size) return rfail(&r, "header: the data section would start at byte %llu, past the end of the file",
                                      (unsigned long long)data_start), NULL;
  uint64_t data_size = size - data_start;
  Span *sorted = kiln_alloc(sizeof(Span) * (size_t)(ntensors + 1));
  memcpy(sorted, spans, sizeof(Span) * (size_t)ntensors);
  if (!check_spans(&r, f, sorted, f->ntensors, data_size, alignment)) return NULL;
  for (int i = 0; i < f->ntensors; i++) {
    SafeTensor *t = &f->tensors[i];
    t->loads = types[i]->loads;
    t->bytes = all + data_start + spans[i].offset;
    t->ggml_type = (int)types[i]->id;
    for (int w = WF_F16; w < WF__COUNT; w++)
      if (t->loads && wformat_info((WFormat)w)->ggml_type == (int)types[i]->id) {
        t->raw_fmt = (WFormat)w;
        t->raw = all + data_start + spans[i].offset;
      }
  }
  return f;
}

SafeFile *gguf_load(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return snprintf(err, errlen, "%s: not a regular file (a GGUF file must be one)", path), NULL;
  size_t size;
  bool mapped;
  unsigned char *all = kiln_map_file(path, &size, &mapped, err, errlen);
  if (!all) return NULL;
  SafeFile *f = gguf_parse(path, all, size, err, errlen);
  for (int i = 0; f && i < f->ntensors; i++) f->tensors[i].mapped = mapped;
  return f;
}

bool gguf_is(const unsigned char *head, size_t n) { return n >= 4 && memcmp(head, "GGUF", 4) == 0; }

/* llama.cpp's names for the llama architecture's tensors, and Meta's (llama2.c's and
 * models/stories.lua's) for the same: GGUF keeps Meta's rotary layout of wq and wk, so a
 * rename is all that maps one to the other. */
static const struct {
  const char *gguf, *meta;
} llama_names[] = {
    {"token_embd.weight", "tok_embeddings.weight"}, {"output_norm.weight", "norm.weight"},
    {"output.weight", "output.weight"},             {"attn_norm.weight", "attention_norm.weight"},
    {"attn_q.weight", "attention.wq.weight"},       {"attn_k.weight", "attention.wk.weight"},
    {"attn_v.weight", "attention.wv.weight"},       {"attn_output.weight", "attention.wo.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},         {"ffn_gate.weight", "feed_forward.w1.weight"},
    {"ffn_down.weight", "feed_forward.w2.weight"},  {"ffn_up.weight", "feed_forward.w3.weight"},
};

const char *gguf_meta_name(const char *name) {
  const char *rest = name;
  char layer[32] = "";
  if (strncmp(name, "blk.", 4) == 0) {
    const char *p = name + 4;
    size_t n = 0;
    while (p[n] >= '0' && p[n] <= '9' && n < 9) n++;
    if (n == 0 || p[n] != '.') return name;
    snprintf(layer, sizeof layer, "layers.%.*s.", (int)n, p);
    rest = p + n + 1;
  }
  for (size_t i = 0; i < sizeof llama_names / sizeof llama_names[0]; i++) {
    bool per_layer = strncmp(llama_names[i].gguf, "attn_", 5) == 0 || strncmp(llama_names[i].gguf, "ffn_", 4) == 0;
    if (per_layer != (layer[0] != 0) || strcmp(rest, llama_names[i].gguf) != 0) continue;
    return kiln_fmt("%s%s", layer, llama_names[i].meta);
  }
  return name;
}
