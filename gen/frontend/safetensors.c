/*
 * safetensors.c — reads and validates a safetensors file (the format of the
 * Hugging Face `safetensors` library) into f32 tensors.
 *
 * Layout: 8 bytes little-endian header length N, N bytes of JSON, then the data
 * section. The JSON object maps each tensor name to {"dtype", "shape",
 * "data_offsets": [begin, end]} (offsets relative to the data section) plus an
 * optional "__metadata__" object of strings. The JSON parser below is small and
 * strict (RFC 8259: no trailing commas, no comments, escapes checked, valid
 * UTF-8, duplicate keys refused); the only thing allowed after the top-level
 * object is whitespace, which writers use to pad the header.
 *
 * Every tensor's bytes must lie inside the data section and match
 * numel * element size; ranges may not overlap, and together they must cover
 * the data section without holes (the format requires it). F32, F16 and BF16
 * are widened to f32 exactly (f16 subnormals, infinities and NaNs included).
 * Values are decoded when a weight needs them (safetensor_f32), from the file mapped
 * read-only, so a model is never held whole in memory. Other dtypes of the format (I64,
 * U8, BOOL, F64...) are validated but not loaded (loads is false) and only a parameter that asks for one is an error,
 * so a PyTorch state_dict with BatchNorm's int64 num_batches_tracked still loads.
 * Tensors are kept in the order the header lists them.
 *
 * Errors: "path: header: problem" or "path: tensor 'name': problem".
 */
#include "kiln.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A string from the file as a message shows it: control characters escaped (\n,
 * \x1f), so a message stays one line, and at most 200 bytes of it. */
static const char *shown(const char *s) {
  Buf b = {0};
  for (const unsigned char *p = (const unsigned char *)s; *p && b.len < 200; p++) {
    if (*p == '\n') buf_puts(&b, "\\n");
    else if (*p == '\t') buf_puts(&b, "\\t");
    else if (*p < 0x20 || *p == 0x7f) buf_printf(&b, "\\x%02x", *p);
    else buf_put(&b, p, 1);
  }
  char *out = kiln_strdup(b.data ? b.data : "");
  if (strlen(s) > 200) out = kiln_fmt("%s...", out);
  buf_free(&b);
  return out;
}

/* ---- the file ---- */

typedef struct {
  const char *name;
  int size;                     /* bytes per element */
} DtypeInfo;

static const DtypeInfo st_dtypes[] = {
    {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
    {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};

typedef struct {
  int64_t begin, end;
  int index;
} Range;

/* Orders ranges by begin, end, then header position: a total, deterministic order. */
static int range_cmp(const void *a, const void *b) {
  const Range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return x->index - y->index;
}


/* Writes "prefix: message" to err and returns false. */
static bool st_fail(char *err, size_t errlen, const char *prefix, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool st_fail(char *err, size_t errlen, const char *prefix, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(err, errlen, "%s: ", prefix);
  if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return false;
}
#define HEADER_FAIL(...) st_fail(err, errlen, kiln_fmt("%s: header", path), __VA_ARGS__)
#define TENSOR_FAIL(name, ...) st_fail(err, errlen, kiln_fmt("%s: tensor '%s'", path, shown(name)), __VA_ARGS__)

/* Validates one header entry and fills t (data not yet converted); *range gets its bytes. */
static bool parse_entry(const char *path, const char *name, const JVal *v, int64_t data_size, SafeTensor *t, Range *range,
                        char *err, size_t errlen) {
  int elem_size = 0, *elem = &elem_size;
  if (v->t != J_OBJ) return TENSOR_FAIL(name, "entry must be an object");
  const JVal *dt = NULL, *shape = NULL, *offs = NULL;
  for (int i = 0; i < v->n; i++) {
    if (strcmp(v->keys[i], "dtype") == 0) dt = &v->items[i];
    else if (strcmp(v->keys[i], "shape") == 0) shape = &v->items[i];
    else if (strcmp(v->keys[i], "data_offsets") == 0) offs = &v->items[i];
    else return TENSOR_FAIL(name, "unknown field \"%s\"", shown(v->keys[i]));
  }
  if (!dt || !shape || !offs) return TENSOR_FAIL(name, "missing \"%s\"", !dt ? "dtype" : !shape ? "shape" : "data_offsets");
  if (dt->t != J_STR) return TENSOR_FAIL(name, "dtype must be a string");
  *elem = 0;
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (strcmp(st_dtypes[i].name, dt->text) == 0) *elem = st_dtypes[i].size;
  if (!*elem) return TENSOR_FAIL(name, "unknown dtype '%s' (Kiln reads F32, F16, BF16)", shown(dt->text));
  t->file_dtype = dt->text;
  if (shape->t != J_ARR) return TENSOR_FAIL(name, "shape must be an array of integers");
  if (shape->n > KILN_MAX_RANK) return TENSOR_FAIL(name, "rank %d exceeds Kiln's limit of %d", shape->n, KILN_MAX_RANK);
  t->shape.rank = shape->n;
  int64_t numel = 1;
  for (int i = 0; i < shape->n; i++) {
    if (!json_uint(&shape->items[i], &t->shape.dim[i])) return TENSOR_FAIL(name, "shape entries must be non-negative integers");
    if (t->shape.dim[i] && numel > ((int64_t)1 << 53) / t->shape.dim[i]) return TENSOR_FAIL(name, "shape is too large");
    numel *= t->shape.dim[i];
  }
  if (offs->t != J_ARR || offs->n != 2 || !json_uint(&offs->items[0], &range->begin) || !json_uint(&offs->items[1], &range->end))
    return TENSOR_FAIL(name, "data_offsets must be [begin, end], non-negative integers");
  if (range->begin > range->end) return TENSOR_FAIL(name, "data_offsets [%lld, %lld] end before they begin", (long long)range->begin, (long long)range->end);
  if (range->end > data_size)
    return TENSOR_FAIL(name, "data_offsets [%lld, %lld] run past the data section (%lld bytes)", (long long)range->begin,
                       (long long)range->end, (long long)data_size);
  if (range->end - range->begin != numel * *elem)
    return TENSOR_FAIL(name, "data_offsets [%lld, %lld] hold %lld bytes; %s %s needs %lld", (long long)range->begin,
                       (long long)range->end, (long long)(range->end - range->begin), dt->text, shape_str(&t->shape),
                       (long long)(numel * *elem));
  return true;
}

/* Sorted ranges must tile the data section exactly: no overlap, no hole. Empty tensors are skipped. */
static bool check_tiling(const char *path, const SafeFile *f, Range *r, int n, int64_t data_size, char *err, size_t errlen) {
  qsort(r, (size_t)n, sizeof *r, range_cmp);
  int64_t pos = 0;
  int prev = -1;
  for (int i = 0; i < n; i++) {
    if (r[i].begin == r[i].end) continue;
    if (r[i].begin < pos)
      return TENSOR_FAIL(f->tensors[r[i].index].name, "bytes [%lld, %lld) overlap tensor '%s' [%lld, %lld)", (long long)r[i].begin,
                         (long long)r[i].end, shown(f->tensors[r[prev].index].name), (long long)r[prev].begin, (long long)r[prev].end);
    if (r[i].begin > pos)
      return HEADER_FAIL("hole: bytes [%lld, %lld) of the data section belong to no tensor", (long long)pos, (long long)r[i].begin);
    pos = r[i].end;
    prev = i;
  }
  if (pos != data_size)
    return HEADER_FAIL("hole: bytes [%lld, %lld) of the data section belong to no tensor", (long long)pos, (long long)data_size);
  return true;
}

/* __metadata__ must map strings to strings. */
static bool check_metadata(const JVal *v) {
  if (v->t != J_OBJ) return false;
  for (int i = 0; i < v->n; i++)
    if (v->items[i].t != J_STR) return false;
  return true;
}

/* Contract in kiln.h; everything (file bytes, tensors) lives in the arena. */
SafeFile *safetensors_load(const char *path, char *err, size_t errlen) {
  /* A weights file is a regular file of known size: a pipe or a device (/dev/zero)
   * would have to be read whole before its size could be checked. */
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return snprintf(err, errlen, "%s: not a regular file (a safetensors file must be one)", path), NULL;
  size_t size;
  bool mapped;
  unsigned char *all = kiln_map_file(path, &size, &mapped, err, errlen);
  if (!all) return NULL;
  SafeFile *f = safetensors_parse(path, all, size, err, errlen);
  for (int i = 0; f && i < f->ntensors; i++) f->tensors[i].mapped = mapped;
  return f;
}

/* Contract in kiln.h: names and shapes are copies in the arena; tensors point into all,
 * which must outlive them (their values are decoded when a weight needs them). */
SafeFile *safetensors_parse(const char *path, const unsigned char *all, size_t size, char *err, size_t errlen) {
  if (size < 8) return HEADER_FAIL("the file has %zu bytes, fewer than the 8-byte header length", size), NULL;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | all[i];
  if (hlen > size - 8)
    return HEADER_FAIL("header length %llu exceeds the %zu bytes after it (truncated, or not a safetensors file)",
                       (unsigned long long)hlen, size - 8), NULL;
  if (hlen > ((uint64_t)100 << 20)) return HEADER_FAIL("header length %llu is over 100 MiB", (unsigned long long)hlen), NULL;
  JVal root;
  char *jerr = NULL;
  if (!json_parse(all + 8, (size_t)hlen, &root, &jerr)) return HEADER_FAIL("%s", jerr), NULL;
  if (root.t != J_OBJ) return HEADER_FAIL("the JSON must be an object"), NULL;
  int64_t data_size = (int64_t)(size - 8 - hlen);

  SafeFile *f = kiln_alloc(sizeof *f);
  f->path = kiln_strdup(path);
  f->tensors = kiln_alloc(sizeof(SafeTensor) * (size_t)(root.n + 1));
  Range *ranges = kiln_alloc(sizeof(Range) * (size_t)(root.n + 1));
  for (int i = 0; i < root.n; i++) {
    const char *name = root.keys[i];
    if (strcmp(name, "__metadata__") == 0) {
      const JVal *m = &root.items[i];
      if (!check_metadata(m)) return HEADER_FAIL("__metadata__ must map strings to strings"), NULL;
      f->meta = kiln_alloc(sizeof(MetaKV) * (size_t)(m->n + 1));
      for (int k = 0; k < m->n; k++) {
        if (strlen(m->keys[k]) != m->keylens[k]) return HEADER_FAIL("a __metadata__ key contains a NUL character"), NULL;
        f->meta[f->nmeta++] = (MetaKV){m->keys[k], {.kind = MV_STR, .s = m->items[k].text, .slen = m->items[k].len}};
      }
      continue;
    }
    if (strlen(name) != root.keylens[i]) return HEADER_FAIL("a tensor name contains a NUL character"), NULL;
    if (!name[0]) return HEADER_FAIL("a tensor has an empty name"), NULL;
    SafeTensor *t = &f->tensors[f->ntensors];
    t->name = name;
    t->dtype = DT_F32;
    ranges[f->ntensors].index = f->ntensors;
    if (!parse_entry(path, name, &root.items[i], data_size, t, &ranges[f->ntensors], err, errlen)) return NULL;
    f->ntensors++;
  }
  const unsigned char *data = all + 8 + hlen;
  for (int i = 0; i < f->ntensors; i++) {
    SafeTensor *t = &f->tensors[i];
    t->bytes = data + ranges[i].begin;
    t->ggml_type = -1;
    t->loads = strcmp(t->file_dtype, "F32") == 0 || strcmp(t->file_dtype, "F16") == 0 || strcmp(t->file_dtype, "BF16") == 0;
    bool f16 = strcmp(t->file_dtype, "F16") == 0, bf16 = strcmp(t->file_dtype, "BF16") == 0;
    if (f16 || bf16) t->raw_fmt = f16 ? WF_F16 : WF_BF16, t->raw = data + ranges[i].begin;   /* kept as stored (pass_quant) */
  }
  if (!check_tiling(path, f, ranges, f->ntensors, data_size, err, errlen)) return NULL;
  return f;
}

/* The tensor called name, or NULL (linear search: files hold hundreds of tensors, not millions). */
SafeTensor *safetensors_find(SafeFile *f, const char *name) {
  for (int i = 0; i < f->ntensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}
