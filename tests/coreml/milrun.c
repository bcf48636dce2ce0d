/*
 * milrun.c — a small checker and interpreter for the ML Programs Kiln emits.
 *
 *   milrun PKG.mlpackage sig               print "in|out NAME fp32|int32 D0,D1,..." per feature
 *   milrun PKG.mlpackage check             validate only
 *   milrun PKG.mlpackage run IN OUT        read IN/<input>.npy, write OUT/<output>.npy
 *          [-V DIR]                        ... and every float compile-time constant of 10 or
 *                                          more elements (const and constexpr results, e.g.
 *                                          a decompressed weight) as DIR/<name>.npy
 *
 * Nothing here ran Core ML: this is the test oracle for the package's *content*.
 * It reads model.mlmodel through the same protobuf-c schema as the emitter
 * (gen/target/coreml.proto) but shares no code with it, and it is strict on purpose:
 *   - Model: spec 6..9, an mlProgram of version 1 with one function "main" whose
 *     opset matches the spec and names its one block specialization; function
 *     inputs and block outputs equal the description's features (names, order,
 *     fp32/int32 types, shapes);
 *   - every op: exactly one output, a unique identifier that is no MIL keyword;
 *     a `name` attribute (const: `name` and `val` only; others: `name` only);
 *     inputs bound by name to values defined earlier; parameters checked against
 *     a signature table (known, required present, every optional parameter that
 *     has a default written explicitly, const-only parameters bound to const
 *     ops, parameters of later op versions absent at earlier specs); float
 *     operands of one op of the same type; the declared output type equal to
 *     the type the interpreter computes;
 *   - blobs: "@model_path/weights/weight.bin", header version 2, sentinel, the
 *     dtype code of the tensor type, size = elements * width, data inside the file.
 * Evaluation is in double precision, rounded to the value's MIL type (fp16 or
 * fp32) after every op, which models fp16 storage between ops.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coreml.pb-c.h"

typedef CoreML__Specification__MILSpec__Operation Op;
typedef CoreML__Specification__MILSpec__Value Value;
typedef CoreML__Specification__MILSpec__TensorType TType;

enum { MAXR = 8 };
/* MIL DataType numbers. The 8- and 4-bit integers are only compressed weights' data. */
typedef enum { T_BOOL = 1, T_STR = 2, T_F16 = 10, T_F32 = 11, T_I8 = 21, T_I32 = 23, T_I4 = 25, T_U8 = 31, T_U4 = 35 } DT;

typedef struct {
  DT dt;
  int rank;
  int64_t dim[MAXR];
  int64_t n;
  double *v;          /* numbers (bools 0/1) */
  const char *s;      /* T_STR scalar */
  int is_const;
  int state;          /* a function's state input: 1 + its index in the state store; 0 otherwise */
} Tensor;

static const char *pkg;
static int spec;
static const char *cur_op = "";

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "milrun: %s: %s%s", pkg, *cur_op ? cur_op : "", *cur_op ? ": " : "");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

/* Every allocation is remembered and released at exit (a test tool: simple, and
 * clean under LeakSanitizer). */
static struct {
  void **p;
  size_t n, cap;
} allocs;

static CoreML__Specification__Model *unpacked;

static void free_all(void) {
  if (unpacked) core_ml__specification__model__free_unpacked(unpacked, NULL);
  unpacked = NULL;
  for (size_t i = 0; i < allocs.n; i++) free(allocs.p[i]);
  free(allocs.p);
  allocs.p = NULL;
  allocs.n = allocs.cap = 0;
}

static void *xalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) fail("out of memory");
  if (allocs.n == allocs.cap) {
    size_t cap = allocs.cap ? 2 * allocs.cap : 1024;
    void **q = realloc(allocs.p, cap * sizeof *q);
    if (!q) fail("out of memory");
    allocs.p = q, allocs.cap = cap;
  }
  allocs.p[allocs.n++] = p;
  return p;
}

static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = xalloc((size_t)n + 1);
  if (n > 0 && fread(d, 1, (size_t)n, f) != (size_t)n) fail("cannot read %s", path);
  fclose(f);
  *len = (size_t)n;
  return d;
}

/* ---- fp16 ---- */

static float half_to_float(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
  return s ? -v : v;
}

/* Round to the nearest fp16 (ties to even) by searching the exact grid. */
static double round_f16(double x) {
  if (isnan(x)) return x;
  double a = fabs(x);
  if (a >= 65520.0) return x < 0 ? -INFINITY : INFINITY;
  int e;
  frexp(a, &e);                                  /* a = f * 2^e, f in [0.5, 1) */
  double ulp = ldexp(1.0, (e - 11 < -24) ? -24 : e - 11);
  double q = a / ulp, r = floor(q), d = q - r;
  if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0)) r += 1;
  return copysign(r * ulp, x);
}

static double round_to(DT dt, double x) {
  switch (dt) {
  case T_F16: return round_f16((double)(float)x);
  case T_F32: return (double)(float)x;
  case T_I32: return (double)(int32_t)x;
  case T_BOOL: return x != 0;
  default: return x;
  }
}

static const char *dt_name(DT d) {
  switch (d) {
  case T_BOOL: return "bool";
  case T_STR: return "string";
  case T_F16: return "fp16";
  case T_F32: return "fp32";
  case T_I32: return "int32";
  case T_I8: return "int8";
  case T_U8: return "uint8";
  case T_I4: return "int4";
  case T_U4: return "uint4";
  }
  return "?";
}

static int is_float(DT d) { return d == T_F16 || d == T_F32; }
/* The narrow integers MIL allows only as a compressed weight's data (constexpr ops). */
static int is_packed(DT d) { return d == T_I8 || d == T_U8 || d == T_I4 || d == T_U4; }
static int bits_of(DT d) { return d == T_I4 || d == T_U4 ? 4 : 8; }
static int is_signed(DT d) { return d == T_I8 || d == T_I4; }

/* ---- tensors ---- */

static Tensor *tnew(DT dt, int rank, const int64_t *dim) {
  Tensor *t = xalloc(sizeof *t);
  t->dt = dt;
  t->rank = rank;
  t->n = 1;
  for (int i = 0; i < rank; i++) t->dim[i] = dim[i], t->n *= dim[i];
  t->v = xalloc(sizeof(double) * (size_t)(t->n + 1));
  return t;
}

static Tensor *tlike(const Tensor *a, DT dt) { return tnew(dt, a->rank, a->dim); }

static void shape_str(const Tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->rank; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->dim[i]);
  snprintf(buf + k, n - k, "]");
}

/* ---- the value table (name -> tensor), open addressing ---- */

static struct {
  const char **k;
  Tensor **v;
  size_t cap, n;
} vals;

static size_t vslot(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = s; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  size_t i = (size_t)h & (vals.cap - 1);
  while (vals.k[i] && strcmp(vals.k[i], s) != 0) i = (i + 1) & (vals.cap - 1);
  return i;
}

static Tensor *vget(const char *s) { return vals.cap ? vals.v[vslot(s)] : NULL; }

static void vput(const char *s, Tensor *t) {
  if (2 * (vals.n + 1) > vals.cap) {
    const char **ok = vals.k;
    Tensor **ov = vals.v;
    size_t oc = vals.cap;
    vals.cap = oc ? oc * 2 : 1024;
    vals.k = xalloc(sizeof *vals.k * vals.cap);
    vals.v = xalloc(sizeof *vals.v * vals.cap);
    for (size_t i = 0; i < oc; i++)
      if (ok[i]) {
        size_t j = vslot(ok[i]);
        vals.k[j] = ok[i], vals.v[j] = ov[i];
      }

  }
  size_t i = vslot(s);
  if (vals.k[i]) fail("value '%s' is defined twice", s);
  vals.k[i] = s, vals.v[i] = t;
  vals.n++;
}

/* ---- names ---- */

static int is_ident(const char *s) {
  if (!*s || (*s >= '0' && *s <= '9')) return 0;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) return 0;
  return 1;
}

static int is_keyword(const char *s) {
  static const char *const kw[] = {"any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true",
                                   "false", "string", "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32",
                                   "int64", "uint8", "uint16", "uint32", "uint64", "state"};
  for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
    if (strcmp(s, kw[i]) == 0) return 1;
  return 0;
}

/* ---- types ---- */

static const TType *tensor_type(const CoreML__Specification__MILSpec__ValueType *vt, const char *what) {
  if (!vt || vt->type_case != CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE) fail("%s: not a tensor type", what);
  const TType *t = vt->tensortype;
  if (t->rank < 0 || t->rank > 5) fail("%s: rank %lld (Core ML: 0..5)", what, (long long)t->rank);
  if ((int64_t)t->n_dimensions != t->rank) fail("%s: %zu dimensions for rank %lld", what, t->n_dimensions, (long long)t->rank);
  for (size_t i = 0; i < t->n_dimensions; i++)
    if (t->dimensions[i]->dimension_case != CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT)
      fail("%s: dimension %zu is not constant", what, i);
  switch ((int)t->datatype) {
  case T_BOOL: case T_STR: case T_F16: case T_F32: case T_I32: case T_I8: case T_U8: case T_I4: case T_U4: break;
  default: fail("%s: data type %d is not one Kiln emits", what, (int)t->datatype);
  }
  if (t->n_attributes) fail("%s: tensor type attributes", what);
  return t;
}

static int type_matches(const TType *t, const Tensor *x) {
  if ((int)t->datatype != (int)x->dt || t->rank != x->rank) return 0;
  for (int i = 0; i < x->rank; i++)
    if ((int64_t)t->dimensions[i]->constant->size != x->dim[i]) return 0;
  return 1;
}

static Tensor *from_type(const TType *t) {
  int64_t dim[MAXR];
  for (int i = 0; i < t->rank; i++) dim[i] = (int64_t)t->dimensions[i]->constant->size;
  return tnew((DT)t->datatype, (int)t->rank, dim);
}

/* ---- const values ---- */

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static uint8_t *wbin;
static size_t wbin_len;

static void load_weights(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/Data/com.apple.CoreML/weights/weight.bin", pkg);
  wbin = read_file(path, &wbin_len);
  if (!wbin) return;
  if (wbin_len < 64 || rd32(wbin + 4) != 2) fail("weight.bin: no version-2 storage header");
}

/* Narrow integers as MILBlob and the immediate bytes field store them: one byte each, or
 * 4-bit fields LSB first (element i in bits 4i .. 4i + 3 of the stream), two's complement
 * for the signed types. */
static void unpack_ints(Tensor *t, const uint8_t *p) {
  for (int64_t i = 0; i < t->n; i++) {
    int v = bits_of(t->dt) == 8 ? p[i] : (p[i / 2] >> (4 * (i % 2))) & 15;
    if (is_signed(t->dt) && v >= 1 << (bits_of(t->dt) - 1)) v -= 1 << bits_of(t->dt);
    t->v[i] = v;
  }
}

static void read_blob(Tensor *t, const CoreML__Specification__MILSpec__Value__BlobFileValue *b) {
  if (strcmp(b->filename, "@model_path/weights/weight.bin") != 0) fail("blob file '%s'", b->filename);
  if (!wbin) fail("a blob value but no weights/weight.bin");
  uint64_t off = b->offset;
  if (off % 64 || off + 64 > wbin_len) fail("blob metadata offset %llu bad (file %zu bytes)", (unsigned long long)off, wbin_len);
  const uint8_t *md = wbin + off;
  if (rd32(md) != 0xDEADBEEFu) fail("blob at %llu: bad sentinel", (unsigned long long)off);
  uint32_t code = rd32(md + 4);
  /* MILBlob's BlobDataType codes: Float16 1, Float32 2, UInt8 3, Int8 4, Int4 8, UInt4 11. */
  int width = t->dt == T_F16 ? 2 : t->dt == T_F32 ? 4 : is_packed(t->dt) ? 1 : 0;
  uint32_t want = t->dt == T_F16 ? 1 : t->dt == T_F32 ? 2 : t->dt == T_U8 ? 3 : t->dt == T_I8 ? 4 : t->dt == T_I4 ? 8 : t->dt == T_U4 ? 11 : 0;
  if (!want || code != want) fail("blob at %llu: dtype code %u for a %s tensor", (unsigned long long)off, code, dt_name(t->dt));
  uint64_t size = rd64(md + 8), data = rd64(md + 16), pad = rd64(md + 24);
  uint64_t bits = (uint64_t)t->n * (is_packed(t->dt) ? (uint64_t)bits_of(t->dt) : 8u * (uint64_t)width);
  if (size != (bits + 7) / 8 || size == 0) fail("blob at %llu: %llu bytes for %lld elements", (unsigned long long)off, (unsigned long long)size, (long long)t->n);
  if (pad != 8 * size - bits) fail("blob at %llu: padding_size_in_bits %llu, want %llu", (unsigned long long)off, (unsigned long long)pad, (unsigned long long)(8 * size - bits));
  if (data % 64 || data < off + 64 || data + size > wbin_len) fail("blob at %llu: data offset %llu outside the file", (unsigned long long)off, (unsigned long long)data);
  if (is_packed(t->dt)) {
    unpack_ints(t, wbin + data);
    return;
  }
  for (int64_t i = 0; i < t->n; i++) {
    const uint8_t *p = wbin + data + (size_t)i * (size_t)width;
    if (width == 2) t->v[i] = half_to_float((uint16_t)(p[0] | p[1] << 8));
    else {
      uint32_t u = rd32(p);
      float f;
      memcpy(&f, &u, 4);
      t->v[i] = f;
    }
  }
}

static Tensor *const_value(const Value *v) {
  const TType *tt = tensor_type(v->type, "const val");
  Tensor *t = from_type(tt);
  t->is_const = 1;
  if (v->value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE) {
    read_blob(t, v->blobfilevalue);
    return t;
  }
  if (v->value_case != CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE ||
      v->immediatevalue->value_case != CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR)
    fail("const val is neither an immediate tensor nor a blob");
  if (v->docstring && *v->docstring) fail("const val has a docString");
  const CoreML__Specification__MILSpec__TensorValue *tv = v->immediatevalue->tensor;
  size_t n = (size_t)t->n;
  switch (t->dt) {
  case T_F32:
    if (tv->value_case != CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS || tv->floats->n_values != n) fail("fp32 immediate not in floats[%zu]", n);
    for (size_t i = 0; i < n; i++) t->v[i] = tv->floats->values[i];
    break;
  case T_F16:
    if (tv->value_case != CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES || tv->bytes->values.len != 2 * n) fail("fp16 immediate not in bytes[%zu]", 2 * n);
    for (size_t i = 0; i < n; i++) t->v[i] = half_to_float((uint16_t)(tv->bytes->values.data[2 * i] | tv->bytes->values.data[2 * i + 1] << 8));
    break;
  case T_I32:
    if (tv->value_case != CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS || tv->ints->n_values != n) fail("int32 immediate not in ints[%zu]", n);
    for (size_t i = 0; i < n; i++) t->v[i] = tv->ints->values[i];
    break;
  case T_BOOL:
    if (tv->value_case != CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS || tv->bools->n_values != n) fail("bool immediate not in bools[%zu]", n);
    for (size_t i = 0; i < n; i++) t->v[i] = tv->bools->values[i] != 0;
    break;
  case T_I8: case T_U8: case T_I4: case T_U4:
    if (tv->value_case != CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES || tv->bytes->values.len != (n * (size_t)bits_of(t->dt) + 7) / 8)
      fail("%s immediate not in bytes[%zu]", dt_name(t->dt), (n * (size_t)bits_of(t->dt) + 7) / 8);
    unpack_ints(t, tv->bytes->values.data);
    break;
  case T_STR:
    if (tv->value_case != CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS || tv->strings->n_values != 1 || n != 1) fail("string immediate not one scalar string");
    t->s = tv->strings->values[0];
    break;
  }
  return t;
}

/* ---- op signatures ---- */

enum { REQ = 1, CONST = 2, DEF = 4, OPT = 8, VAR = 16, STATE = 32 /* a state input, and only there */ };
typedef struct {
  const char *name;
  unsigned f;
  int from;            /* first spec version with this parameter (0: all) */
} Param;

typedef struct Ctx {
  const Op *op;
  Tensor *in[12];      /* by parameter index */
  Tensor **var;        /* variadic values */
  int nvar;
} Ctx;

typedef Tensor *(*Eval)(Ctx *c, const char *type);

typedef struct {
  const char *type;
  Eval fn;
  Param p[9];
} OpDef;

/* The first spec version with op `type`: 9 (iOS18) for the state ops, slice_update and
 * the compressed-weight ops of iOS18 (coremltools' mil/ops/defs/iOS18/compression.py). */
static int op_from(const char *type) {
  return !strcmp(type, "read_state") || !strcmp(type, "write_state") || !strcmp(type, "slice_update") ||
                 !strncmp(type, "constexpr_", 10) ? 9 : 0;
}

#define X_ {"x", REQ, 0}
static Tensor *ev_binary(Ctx *, const char *);
static Tensor *ev_unary(Ctx *, const char *);
static Tensor *ev_select(Ctx *, const char *);
static Tensor *ev_cast(Ctx *, const char *);
static Tensor *ev_linear(Ctx *, const char *);
static Tensor *ev_matmul(Ctx *, const char *);
static Tensor *ev_conv(Ctx *, const char *);
static Tensor *ev_conv_transpose(Ctx *, const char *);
static Tensor *ev_pad(Ctx *, const char *);
static Tensor *ev_pool(Ctx *, const char *);
static Tensor *ev_reduce(Ctx *, const char *);
static Tensor *ev_argreduce(Ctx *, const char *);
static Tensor *ev_softmax(Ctx *, const char *);
static Tensor *ev_layer_norm(Ctx *, const char *);
static Tensor *ev_batch_norm(Ctx *, const char *);
static Tensor *ev_reshape(Ctx *, const char *);
static Tensor *ev_transpose(Ctx *, const char *);
static Tensor *ev_concat(Ctx *, const char *);
static Tensor *ev_slice(Ctx *, const char *);
static Tensor *ev_gather(Ctx *, const char *);
static Tensor *ev_gather_along_axis(Ctx *, const char *);
static Tensor *ev_argsort(Ctx *, const char *);
static Tensor *ev_scatter(Ctx *, const char *);
static Tensor *ev_read_state(Ctx *, const char *);
static Tensor *ev_write_state(Ctx *, const char *);
static Tensor *ev_slice_update(Ctx *, const char *);
static Tensor *ev_shift_scale(Ctx *, const char *);
static Tensor *ev_lut(Ctx *, const char *);

static const OpDef defs[] = {
    {"add", ev_binary, {X_, {"y", REQ, 0}}},
    {"sub", ev_binary, {X_, {"y", REQ, 0}}},
    {"mul", ev_binary, {X_, {"y", REQ, 0}}},
    {"real_div", ev_binary, {X_, {"y", REQ, 0}}},
    {"pow", ev_binary, {X_, {"y", REQ, 0}}},
    {"maximum", ev_binary, {X_, {"y", REQ, 0}}},
    {"minimum", ev_binary, {X_, {"y", REQ, 0}}},
    {"equal", ev_binary, {X_, {"y", REQ, 0}}},
    {"not_equal", ev_binary, {X_, {"y", REQ, 0}}},
    {"less", ev_binary, {X_, {"y", REQ, 0}}},
    {"less_equal", ev_binary, {X_, {"y", REQ, 0}}},
    {"greater", ev_binary, {X_, {"y", REQ, 0}}},
    {"greater_equal", ev_binary, {X_, {"y", REQ, 0}}},
    {"logical_and", ev_binary, {X_, {"y", REQ, 0}}},
    {"mod", ev_binary, {X_, {"y", REQ, 0}}},
    {"select", ev_select, {{"cond", REQ, 0}, {"a", REQ, 0}, {"b", REQ, 0}}},
    {"abs", ev_unary, {X_}},
    {"exp", ev_unary, {X_}},
    {"sqrt", ev_unary, {X_}},
    {"tanh", ev_unary, {X_}},
    {"sigmoid", ev_unary, {X_}},
    {"sin", ev_unary, {X_}},
    {"cos", ev_unary, {X_}},
    {"erf", ev_unary, {X_}},
    {"floor", ev_unary, {X_}},
    {"ceil", ev_unary, {X_}},
    {"round", ev_unary, {X_}},
    {"relu", ev_unary, {X_}},
    {"silu", ev_unary, {X_}},
    {"identity", ev_unary, {X_}},
    {"log", ev_unary, {X_, {"epsilon", CONST | DEF, 0}}},
    {"rsqrt", ev_unary, {X_, {"epsilon", CONST | DEF, 0}}},
    {"gelu", ev_unary, {X_, {"mode", CONST | DEF, 0}}},
    {"cast", ev_cast, {X_, {"dtype", REQ | CONST, 0}}},
    {"linear", ev_linear, {X_, {"weight", REQ | CONST, 0}, {"bias", CONST | DEF, 0}}},
    {"matmul", ev_matmul, {X_, {"y", REQ, 0}, {"transpose_x", CONST | DEF, 0}, {"transpose_y", CONST | DEF, 0}}},
    {"conv", ev_conv, {X_, {"weight", REQ, 0}, {"bias", OPT | CONST, 0}, {"strides", CONST | DEF, 0}, {"pad_type", CONST | DEF, 0},
                       {"pad", CONST | DEF, 0}, {"dilations", CONST | DEF, 0}, {"groups", CONST | DEF, 0}}},
    {"conv_transpose", ev_conv_transpose, {X_, {"weight", REQ | CONST, 0}, {"bias", OPT | CONST, 0}, {"strides", CONST | DEF, 0},
                                           {"pad_type", CONST | DEF, 0}, {"pad", CONST | DEF, 0}, {"dilations", CONST | DEF, 0},
                                           {"groups", CONST | DEF, 0}}},
    {"pad", ev_pad, {X_, {"pad", REQ | CONST, 0}, {"mode", CONST | DEF, 0}, {"constant_val", CONST | DEF, 0}}},
    {"max_pool", ev_pool, {X_, {"kernel_sizes", REQ | CONST, 0}, {"strides", CONST | DEF, 0}, {"pad_type", REQ | CONST, 0},
                           {"pad", CONST | DEF, 0}, {"ceil_mode", CONST | DEF, 0}}},
    {"avg_pool", ev_pool, {X_, {"kernel_sizes", REQ | CONST, 0}, {"strides", CONST | DEF, 0}, {"pad_type", REQ | CONST, 0},
                           {"pad", CONST | DEF, 0}, {"exclude_padding_from_average", CONST | DEF, 0}, {"ceil_mode", CONST | DEF, 0}}},
    {"reduce_sum", ev_reduce, {X_, {"axes", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"reduce_mean", ev_reduce, {X_, {"axes", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"reduce_max", ev_reduce, {X_, {"axes", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"reduce_min", ev_reduce, {X_, {"axes", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"reduce_prod", ev_reduce, {X_, {"axes", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"reduce_argmax", ev_argreduce, {X_, {"axis", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"reduce_argmin", ev_argreduce, {X_, {"axis", CONST | DEF, 0}, {"keep_dims", CONST | DEF, 0}}},
    {"softmax", ev_softmax, {X_, {"axis", CONST | DEF, 0}}},
    {"layer_norm", ev_layer_norm, {X_, {"axes", CONST | DEF, 0}, {"gamma", CONST | OPT, 0}, {"beta", CONST | OPT, 0}, {"epsilon", CONST | DEF, 0}}},
    {"batch_norm", ev_batch_norm, {X_, {"mean", REQ | CONST, 0}, {"variance", REQ | CONST, 0}, {"gamma", CONST | OPT, 0},
                                   {"beta", CONST | OPT, 0}, {"epsilon", CONST | DEF, 0}}},
    {"reshape", ev_reshape, {X_, {"shape", REQ, 0}}},
    {"transpose", ev_transpose, {X_, {"perm", REQ | CONST, 0}}},
    {"concat", ev_concat, {{"values", REQ | VAR, 0}, {"axis", REQ | CONST, 0}, {"interleave", CONST | DEF, 0}}},
    {"slice_by_index", ev_slice, {X_, {"begin", REQ, 0}, {"end", REQ, 0}, {"stride", CONST | DEF, 0}, {"begin_mask", CONST | DEF, 0},
                                  {"end_mask", CONST | DEF, 0}, {"squeeze_mask", CONST | DEF, 0}}},
    {"gather_along_axis", ev_gather_along_axis, {X_, {"indices", REQ, 0}, {"axis", CONST | DEF, 0}, {"validate_indices", CONST | DEF, 8}}},
    {"scatter_along_axis", ev_scatter, {{"data", REQ, 0}, {"indices", REQ, 0}, {"updates", REQ, 0}, {"axis", CONST | DEF, 0},
                                        {"mode", CONST | DEF, 0}, {"validate_indices", CONST | DEF, 8}}},
    {"scatter", ev_scatter, {{"data", REQ, 0}, {"indices", REQ, 0}, {"updates", REQ, 0}, {"axis", CONST | DEF, 0},
                             {"mode", CONST | DEF, 0}, {"validate_indices", CONST | DEF, 8}}},
    {"argsort", ev_argsort, {X_, {"axis", CONST | DEF, 0}, {"ascending", CONST | DEF, 0}}},
    {"gather", ev_gather, {X_, {"indices", REQ, 0}, {"axis", CONST | DEF, 0}, {"batch_dims", CONST | DEF, 7},
                           {"validate_indices", CONST | DEF, 8}}},
    /* iOS18 (spec 9): states and in-place updates. write_state is what a saved program holds
     * for coremltools' builder op coreml_update_state (followed by a read_state). stride and
     * the masks of slice_update default to None in coremltools: optional, no default. */
    {"read_state", ev_read_state, {{"input", REQ | STATE, 0}}},
    /* iOS18 compressed weights: every input const, the result a compile-time constant. */
    {"constexpr_blockwise_shift_scale", ev_shift_scale, {{"data", REQ | CONST, 0}, {"scale", REQ | CONST, 0}, {"offset", CONST | OPT, 0}}},
    {"constexpr_lut_to_dense", ev_lut, {{"indices", REQ | CONST, 0}, {"lut", REQ | CONST, 0}, {"vector_axis", CONST | OPT, 0}}},
    {"write_state", ev_write_state, {{"input", REQ | STATE, 0}, {"data", REQ, 0}}},
    {"slice_update", ev_slice_update, {X_, {"update", REQ, 0}, {"begin", REQ, 0}, {"end", REQ, 0}, {"stride", CONST | OPT, 0},
                                       {"begin_mask", CONST | OPT, 0}, {"end_mask", CONST | OPT, 0},
                                       {"squeeze_mask", CONST | OPT, 0}}},
};

/* ---- evaluation helpers ---- */

static double scalar(const Tensor *t, const char *what) {
  if (!t || t->n != 1) fail("%s must be a single value", what);
  return t->v[0];
}

static int64_t off_bcast(const Tensor *t, int rank, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = idx[rank - t->rank + i];
    off = off * t->dim[i] + (t->dim[i] == 1 ? 0 : d);
  }
  return off;
}

/* Output shape of numpy broadcasting a with b (fails if they do not broadcast). */
static int bcast_shape(const Tensor *a, const Tensor *b, int64_t *dim) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    if (da != db && da != 1 && db != 1) fail("shapes do not broadcast");
    dim[i] = da == 1 ? db : da;
  }
  return r;
}

static void unravel(int64_t i, int rank, const int64_t *dim, int64_t *idx) {
  for (int k = rank - 1; k >= 0; k--) {
    idx[k] = dim[k] ? i % dim[k] : 0;
    i = dim[k] ? i / dim[k] : 0;
  }
}

static void same_float(const Tensor *a, const Tensor *b, const char *what) {
  if (a->dt != b->dt) fail("%s: operand types %s and %s differ", what, dt_name(a->dt), dt_name(b->dt));
}

static Tensor *ev_binary(Ctx *c, const char *type) {
  Tensor *a = c->in[0], *b = c->in[1];
  same_float(a, b, "x/y");
  int cmp = strstr(type, "equal") || strcmp(type, "less") == 0 || strcmp(type, "greater") == 0;
  int logical = !strcmp(type, "logical_and");
  if (logical != (a->dt == T_BOOL) || a->dt == T_STR) fail("operands of type %s", dt_name(a->dt));
  int64_t dim[MAXR], idx[MAXR];
  int r = bcast_shape(a, b, dim);
  Tensor *o = tnew(cmp || logical ? T_BOOL : a->dt, r, dim);
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, r, dim, idx);
    double x = a->v[off_bcast(a, r, idx)], y = b->v[off_bcast(b, r, idx)], z;
    if (!strcmp(type, "add")) z = x + y;
    else if (!strcmp(type, "sub")) z = x - y;
    else if (!strcmp(type, "mul")) z = x * y;
    else if (!strcmp(type, "real_div")) z = x / y;
    else if (!strcmp(type, "pow")) z = pow(x, y);
    else if (!strcmp(type, "mod")) {   /* floor mod, numpy's %: the sign of y (torch.remainder) */
      if (y == 0) fail("mod by zero");
      z = x - floor(x / y) * y;
    } else if (!strcmp(type, "maximum")) z = fmax(x, y);
    else if (!strcmp(type, "minimum")) z = fmin(x, y);
    else if (!strcmp(type, "equal")) z = x == y;
    else if (!strcmp(type, "not_equal")) z = x != y;
    else if (!strcmp(type, "less")) z = x < y;
    else if (!strcmp(type, "less_equal")) z = x <= y;
    else if (!strcmp(type, "greater")) z = x > y;
    else if (logical) z = x != 0 && y != 0;
    else z = x >= y;
    o->v[i] = z;
  }
  return o;
}

static Tensor *ev_select(Ctx *c, const char *type) {
  (void)type;
  Tensor *k = c->in[0], *a = c->in[1], *b = c->in[2];
  if (k->dt != T_BOOL) fail("cond is %s, not bool", dt_name(k->dt));
  same_float(a, b, "a/b");
  Tensor ab;
  int64_t d1[MAXR], dim[MAXR], idx[MAXR];
  int r1 = bcast_shape(a, b, d1);
  ab.rank = r1;
  memcpy(ab.dim, d1, sizeof d1);
  int r = bcast_shape(k, &ab, dim);
  Tensor *o = tnew(a->dt, r, dim);
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, r, dim, idx);
    o->v[i] = k->v[off_bcast(k, r, idx)] != 0 ? a->v[off_bcast(a, r, idx)] : b->v[off_bcast(b, r, idx)];
  }
  return o;
}

static Tensor *ev_unary(Ctx *c, const char *type) {
  Tensor *x = c->in[0];
  if (!is_float(x->dt) && strcmp(type, "identity") != 0) fail("x is %s, not a float", dt_name(x->dt));
  double eps = 0;
  int tanh_gelu = 0;
  if (!strcmp(type, "log") || !strcmp(type, "rsqrt")) {
    same_float(x, c->in[1], "x/epsilon");
    eps = scalar(c->in[1], "epsilon");
  }
  if (!strcmp(type, "gelu")) {
    const char *mode = c->in[1]->s;
    if (!mode || (strcmp(mode, "EXACT") && strcmp(mode, "TANH_APPROXIMATION"))) fail("gelu mode '%s'", mode ? mode : "?");
    tanh_gelu = !strcmp(mode, "TANH_APPROXIMATION");
  }
  Tensor *o = tlike(x, x->dt);
  for (int64_t i = 0; i < x->n; i++) {
    double v = x->v[i], z;
    if (!strcmp(type, "abs")) z = fabs(v);
    else if (!strcmp(type, "exp")) z = exp(v);
    else if (!strcmp(type, "sqrt")) z = sqrt(v);
    else if (!strcmp(type, "tanh")) z = tanh(v);
    else if (!strcmp(type, "sigmoid")) z = 1 / (1 + exp(-v));
    else if (!strcmp(type, "sin")) z = sin(v);
    else if (!strcmp(type, "cos")) z = cos(v);
    else if (!strcmp(type, "erf")) z = erf(v);
    else if (!strcmp(type, "floor")) z = floor(v);
    else if (!strcmp(type, "ceil")) z = ceil(v);
    else if (!strcmp(type, "round")) z = nearbyint(v);   /* assumed halves-to-even, as numpy: unverified on device */
    else if (!strcmp(type, "relu")) z = v > 0 ? v : 0;
    else if (!strcmp(type, "silu")) z = v / (1 + exp(-v));
    else if (!strcmp(type, "identity")) z = v;
    else if (!strcmp(type, "log")) z = log(v + eps);
    else if (!strcmp(type, "rsqrt")) z = 1 / sqrt(v + eps);
    else if (tanh_gelu) z = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    else z = 0.5 * v * (1 + erf(v / sqrt(2.0)));
    o->v[i] = z;
  }
  return o;
}

static Tensor *ev_cast(Ctx *c, const char *type) {
  (void)type;
  const char *d = c->in[1]->s;
  DT to = !d ? 0 : !strcmp(d, "fp16") ? T_F16 : !strcmp(d, "fp32") ? T_F32 : !strcmp(d, "int32") ? T_I32 : !strcmp(d, "bool") ? T_BOOL : 0;
  if (!to) fail("cast to '%s'", d ? d : "?");
  Tensor *x = c->in[0], *o = tlike(x, to);
  for (int64_t i = 0; i < x->n; i++) o->v[i] = to == T_I32 ? trunc(x->v[i]) : x->v[i];
  return o;
}

static Tensor *ev_linear(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *w = c->in[1], *b = c->in[2];
  /* iOS17's linear (spec 8) puts weight and bias in their own type domain U. */
  same_float(spec >= 8 ? w : x, w, "x/weight");
  same_float(spec >= 8 ? w : x, b, spec >= 8 ? "weight/bias" : "x/bias");
  if (!is_float(x->dt) || !is_float(w->dt)) fail("linear of %s by %s", dt_name(x->dt), dt_name(w->dt));
  if (x->rank < 1 || x->rank > 3 || w->rank != 2 || b->rank != 1) fail("ranks x %d weight %d bias %d", x->rank, w->rank, b->rank);
  int64_t k = x->dim[x->rank - 1], n = w->dim[0];
  if (w->dim[1] != k || b->dim[0] != n) fail("weight/bias do not fit x");
  int64_t dim[MAXR];
  memcpy(dim, x->dim, sizeof dim);
  dim[x->rank - 1] = n;
  Tensor *o = tnew(x->dt, x->rank, dim);
  int64_t rows = x->n / k;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) {
      double s = b->v[j];
      for (int64_t i = 0; i < k; i++) s += x->v[r * k + i] * w->v[j * k + i];
      o->v[r * n + j] = s;
    }
  return o;
}

/* numpy matmul with optional transposes of the last two dims (rank-1 promoted). */
static Tensor *ev_matmul(Ctx *c, const char *type) {
  (void)type;
  Tensor *a = c->in[0], *b = c->in[1];
  same_float(a, b, "x/y");
  int tx = (int)scalar(c->in[2], "transpose_x"), ty = (int)scalar(c->in[3], "transpose_y");
  Tensor A = *a, B = *b;
  int a1 = a->rank == 1, b1 = b->rank == 1;
  if (a1) A.rank = 2, A.dim[0] = 1, A.dim[1] = a->dim[0], tx = 0;
  if (b1) B.rank = 2, B.dim[0] = b->dim[0], B.dim[1] = 1, ty = 0;
  int64_t m = tx ? A.dim[A.rank - 1] : A.dim[A.rank - 2], k = tx ? A.dim[A.rank - 2] : A.dim[A.rank - 1];
  int64_t k2 = ty ? B.dim[B.rank - 1] : B.dim[B.rank - 2], n = ty ? B.dim[B.rank - 2] : B.dim[B.rank - 1];
  if (k != k2) fail("inner dims %lld and %lld differ", (long long)k, (long long)k2);
  Tensor Ab = A, Bb = B;
  Ab.rank -= 2, Bb.rank -= 2;
  int64_t bd[MAXR], idx[MAXR];
  int br = bcast_shape(&Ab, &Bb, bd);
  int64_t od[MAXR];
  int orank = 0;
  for (int i = 0; i < br; i++) od[orank++] = bd[i];
  if (!a1) od[orank++] = m;
  if (!b1) od[orank++] = n;
  Tensor *o = tnew(a->dt, orank, od);
  int64_t nb = 1;
  for (int i = 0; i < br; i++) nb *= bd[i];
  for (int64_t bi = 0; bi < nb; bi++) {
    unravel(bi, br, bd, idx);
    int64_t ao = off_bcast(&Ab, br, idx) * m * k, bo = off_bcast(&Bb, br, idx) * k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t q = 0; q < k; q++)
          s += A.v[ao + (tx ? q * m + i : i * k + q)] * B.v[bo + (ty ? j * k + q : q * n + j)];
        o->v[bi * m * n + i * n + j] = s;
      }
  }
  return o;
}

static void ints_of(const Tensor *t, int n, int64_t *out, const char *what) {
  if (!t || t->dt != T_I32 || t->rank != 1 || t->n != n) fail("%s must be int32[%d]", what, n);
  for (int i = 0; i < n; i++) out[i] = (int64_t)t->v[i];
}

static void custom_pad(const Tensor *pad_type, const Tensor *pad, int64_t *p) {
  if (!pad_type->s || strcmp(pad_type->s, "custom") != 0) fail("pad_type '%s' (Kiln writes custom)", pad_type->s ? pad_type->s : "?");
  ints_of(pad, 4, p, "pad");
}

static Tensor *ev_conv(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *w = c->in[1], *b = c->in[2];
  same_float(x, w, "x/weight");
  if (b) same_float(x, b, "x/bias");
  if (x->rank != 4 || w->rank != 4) fail("Kiln emits 2-D convolutions only (x rank %d)", x->rank);
  int64_t s[2], p[4], d[2], g = (int64_t)scalar(c->in[7], "groups");
  ints_of(c->in[3], 2, s, "strides");
  custom_pad(c->in[4], c->in[5], p);
  ints_of(c->in[6], 2, d, "dilations");
  int64_t N = x->dim[0], C = x->dim[1], H = x->dim[2], W = x->dim[3], O = w->dim[0], CG = w->dim[1], KH = w->dim[2], KW = w->dim[3];
  if (g < 1 || C % g || O % g || CG != C / g) fail("groups %lld do not fit C %lld, weight %lldx%lld", (long long)g, (long long)C, (long long)O, (long long)CG);
  int64_t OH = (H + p[0] + p[1] - d[0] * (KH - 1) - 1) / s[0] + 1, OW = (W + p[2] + p[3] - d[1] * (KW - 1) - 1) / s[1] + 1;
  int64_t od[4] = {N, O, OH, OW};
  Tensor *o = tnew(x->dt, 4, od);
  int64_t og = O / g;
  for (int64_t nn = 0; nn < N; nn++)
    for (int64_t oc = 0; oc < O; oc++) {
      int64_t grp = oc / og;
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = b ? b->v[oc] : 0;
          for (int64_t ci = 0; ci < CG; ci++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ih = oh * s[0] - p[0] + kh * d[0], iw = ow * s[1] - p[2] + kw * d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x->v[((nn * C + grp * CG + ci) * H + ih) * W + iw] * w->v[((oc * CG + ci) * KH + kh) * KW + kw];
              }
          o->v[((nn * O + oc) * OH + oh) * OW + ow] = acc;
        }
    }
  return o;
}

/* conv_transpose: weight [C, O/groups, KH, KW]; pad [top, bottom, left, right] taken
 * off the full output (non-negative); written as a scatter of every input element,
 * the other way round from Kiln's kernels. */
static Tensor *ev_conv_transpose(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *w = c->in[1], *b = c->in[2];
  same_float(x, w, "x/weight");
  if (b) same_float(x, b, "x/bias");
  if (x->rank != 4 || w->rank != 4) fail("Kiln emits 2-D transposed convolutions only (x rank %d)", x->rank);
  int64_t s[2], p[4], d[2], g = (int64_t)scalar(c->in[7], "groups");
  ints_of(c->in[3], 2, s, "strides");
  custom_pad(c->in[4], c->in[5], p);
  ints_of(c->in[6], 2, d, "dilations");
  for (int i = 0; i < 4; i++)
    if (p[i] < 0) fail("negative pad %lld", (long long)p[i]);
  int64_t N = x->dim[0], C = x->dim[1], H = x->dim[2], W = x->dim[3], OG = w->dim[1], KH = w->dim[2], KW = w->dim[3];
  if (g < 1 || C % g || w->dim[0] != C) fail("groups %lld do not fit C %lld, weight [%lld, ...]", (long long)g, (long long)C, (long long)w->dim[0]);
  int64_t O = OG * g, CG = C / g;
  int64_t OH = (H - 1) * s[0] - p[0] - p[1] + d[0] * (KH - 1) + 1, OW = (W - 1) * s[1] - p[2] - p[3] + d[1] * (KW - 1) + 1;
  if (OH < 1 || OW < 1) fail("no output");
  int64_t od[4] = {N, O, OH, OW};
  Tensor *o = tnew(x->dt, 4, od);
  for (int64_t i = 0; i < o->n; i++) o->v[i] = b ? b->v[i / (OH * OW) % O] : 0;
  for (int64_t nn = 0; nn < N; nn++)
    for (int64_t ic = 0; ic < C; ic++)
      for (int64_t ih = 0; ih < H; ih++)
        for (int64_t iw = 0; iw < W; iw++)
          for (int64_t j = 0; j < OG; j++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t oh = ih * s[0] - p[0] + kh * d[0], ow = iw * s[1] - p[2] + kw * d[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                o->v[((nn * O + ic / CG * OG + j) * OH + oh) * OW + ow] +=
                    x->v[((nn * C + ic) * H + ih) * W + iw] * w->v[((ic * OG + j) * KH + kh) * KW + kw];
              }
  return o;
}

/* pad, constant mode: pad lists (before, after) for the last len/2 dims. */
static Tensor *ev_pad(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *pd = c->in[1];
  if (c->in[2] && (!c->in[2]->s || strcmp(c->in[2]->s, "constant") != 0)) fail("mode '%s' (Kiln writes constant)", c->in[2]->s ? c->in[2]->s : "?");
  double val = c->in[3] ? scalar(c->in[3], "constant_val") : 0;
  int np = (int)(pd->n / 2);
  if (pd->n % 2 || np > x->rank) fail("pad has %lld entries for rank %d", (long long)pd->n, x->rank);
  int64_t before[MAXR] = {0}, od[MAXR], idx[MAXR];
  for (int i = 0; i < x->rank; i++) od[i] = x->dim[i];
  for (int i = 0; i < np; i++) {
    int d = x->rank - np + i;
    if (pd->v[2 * i] < 0 || pd->v[2 * i + 1] < 0) fail("negative pad");
    before[d] = (int64_t)pd->v[2 * i];
    od[d] += (int64_t)pd->v[2 * i] + (int64_t)pd->v[2 * i + 1];
  }
  Tensor *o = tnew(x->dt, x->rank, od);
  for (int64_t i = 0; i < o->n; i++) o->v[i] = val;
  for (int64_t i = 0; i < x->n; i++) {
    unravel(i, x->rank, x->dim, idx);
    int64_t off = 0;
    for (int k = 0; k < x->rank; k++) off = off * od[k] + idx[k] + before[k];
    o->v[off] = x->v[i];
  }
  return o;
}

static Tensor *ev_pool(Ctx *c, const char *type) {
  int avg = !strcmp(type, "avg_pool");
  Tensor *x = c->in[0];
  if (x->rank != 4) fail("Kiln emits 2-D pools only");
  int64_t k[2], s[2], p[4];
  ints_of(c->in[1], 2, k, "kernel_sizes");
  ints_of(c->in[2], 2, s, "strides");
  custom_pad(c->in[3], c->in[4], p);
  int excl = avg ? (int)scalar(c->in[5], "exclude_padding_from_average") : 0;
  if (scalar(c->in[avg ? 6 : 5], "ceil_mode") != 0) fail("ceil_mode true");
  int64_t N = x->dim[0], C = x->dim[1], H = x->dim[2], W = x->dim[3];
  int64_t OH = (H + p[0] + p[1] - k[0]) / s[0] + 1, OW = (W + p[2] + p[3] - k[1]) / s[1] + 1;
  int64_t od[4] = {N, C, OH, OW};
  Tensor *o = tnew(x->dt, 4, od);
  for (int64_t nc = 0; nc < N * C; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        double acc = avg ? 0 : -INFINITY;
        int64_t cnt = 0;
        for (int64_t kh = 0; kh < k[0]; kh++)
          for (int64_t kw = 0; kw < k[1]; kw++) {
            int64_t ih = oh * s[0] - p[0] + kh, iw = ow * s[1] - p[2] + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            double v = x->v[(nc * H + ih) * W + iw];
            acc = avg ? acc + v : fmax(acc, v);
            cnt++;
          }
        o->v[(nc * OH + oh) * OW + ow] = avg ? acc / (double)(excl ? cnt : k[0] * k[1]) : acc;
      }
  return o;
}

static Tensor *ev_reduce(Ctx *c, const char *type) {
  Tensor *x = c->in[0];
  if (!is_float(x->dt) && x->dt != T_I32) fail("x is %s", dt_name(x->dt));
  Tensor *ax = c->in[1];
  int red[MAXR] = {0};
  for (int64_t i = 0; i < ax->n; i++) {
    int a = (int)ax->v[i];
    if (a < 0) a += x->rank;
    if (a < 0 || a >= x->rank) fail("axis %d out of range", (int)ax->v[i]);
    red[a] = 1;
  }
  int keep = (int)scalar(c->in[2], "keep_dims");
  int64_t od[MAXR], kd[MAXR], idx[MAXR];
  int orank = 0;
  for (int i = 0; i < x->rank; i++) {
    kd[i] = red[i] ? 1 : x->dim[i];
    if (!red[i] || keep) od[orank++] = kd[i];
  }
  Tensor *o = tnew(x->dt, orank, od);
  int64_t cnt = x->n / (o->n ? o->n : 1);
  int mx = !strcmp(type, "reduce_max"), mn = !strcmp(type, "reduce_min"), pr = !strcmp(type, "reduce_prod");
  for (int64_t i = 0; i < o->n; i++) o->v[i] = mx ? -INFINITY : mn ? INFINITY : pr ? 1 : 0;
  for (int64_t i = 0; i < x->n; i++) {
    unravel(i, x->rank, x->dim, idx);
    int64_t off = 0;
    for (int k = 0; k < x->rank; k++) off = off * kd[k] + (red[k] ? 0 : idx[k]);
    double v = x->v[i], a = o->v[off];
    o->v[off] = mx ? fmax(a, v) : mn ? fmin(a, v) : pr ? a * v : a + v;
  }
  if (!strcmp(type, "reduce_mean"))
    for (int64_t i = 0; i < o->n; i++) o->v[i] /= (double)cnt;
  return o;
}

/* Splits x around `axis` into outer * n * inner. */
static void around(const Tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1, *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= x->dim[i];
  *n = x->dim[axis];
  for (int i = axis + 1; i < x->rank; i++) *inner *= x->dim[i];
}

static int norm_axis(const Tensor *x, double a) {
  int ax = (int)a;
  if (ax < 0) ax += x->rank;
  if (ax < 0 || ax >= x->rank) fail("axis %d out of range", (int)a);
  return ax;
}

/* reduce_argmax/argmin: int32 indices along axis. MIL leaves ties and NaN open; this
 * evaluator takes the first index of the extreme, a NaN beating every number (Kiln's
 * and torch's rule), so it checks the lowering, not Core ML's own choice. */
static Tensor *ev_argreduce(Ctx *c, const char *type) {
  Tensor *x = c->in[0];
  if (!is_float(x->dt)) fail("x is %s", dt_name(x->dt));
  int ax = norm_axis(x, scalar(c->in[1], "axis")), keep = (int)scalar(c->in[2], "keep_dims"), mx = !strcmp(type, "reduce_argmax");
  int64_t od[MAXR], outer, n, inner;
  int orank = 0;
  for (int i = 0; i < x->rank; i++)
    if (i != ax || keep) od[orank++] = i == ax ? 1 : x->dim[i];
  Tensor *o = tnew(T_I32, orank, od);
  around(x, ax, &outer, &n, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) {
      int64_t best = 0;
      for (int64_t i = 1; i < n; i++) {
        double v = x->v[(a * n + i) * inner + b], w = x->v[(a * n + best) * inner + b];
        if (!isnan(w) && (isnan(v) || (mx ? v > w : v < w))) best = i;
      }
      o->v[a * inner + b] = (double)best;
    }
  return o;
}

static Tensor *ev_softmax(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *o = tlike(x, x->dt);
  int64_t outer, n, inner;
  around(x, norm_axis(x, scalar(c->in[1], "axis")), &outer, &n, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) {
      double mx = -INFINITY, s = 0;
      for (int64_t i = 0; i < n; i++) mx = fmax(mx, x->v[(a * n + i) * inner + b]);
      for (int64_t i = 0; i < n; i++) s += exp(x->v[(a * n + i) * inner + b] - mx);
      for (int64_t i = 0; i < n; i++) o->v[(a * n + i) * inner + b] = exp(x->v[(a * n + i) * inner + b] - mx) / s;
    }
  return o;
}

/* layer_norm: Kiln always normalises a trailing run of axes. */
static Tensor *ev_layer_norm(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *ax = c->in[1], *g = c->in[2], *b = c->in[3];
  same_float(x, c->in[4], "x/epsilon");
  double eps = scalar(c->in[4], "epsilon");
  int first = x->rank - (int)ax->n;
  for (int64_t i = 0; i < ax->n; i++)
    if (norm_axis(x, ax->v[i]) != first + i) fail("axes are not the trailing %lld dims", (long long)ax->n);
  int64_t inner = 1;
  for (int i = first; i < x->rank; i++) inner *= x->dim[i];
  if ((g && g->n != inner) || (b && b->n != inner)) fail("gamma/beta do not have the normalised shape");
  if (g) same_float(x, g, "x/gamma");
  if (b) same_float(x, b, "x/beta");
  Tensor *o = tlike(x, x->dt);
  for (int64_t r = 0; r < x->n / inner; r++) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < inner; i++) m += x->v[r * inner + i];
    m /= (double)inner;
    for (int64_t i = 0; i < inner; i++) v += (x->v[r * inner + i] - m) * (x->v[r * inner + i] - m);
    v /= (double)inner;
    for (int64_t i = 0; i < inner; i++)
      o->v[r * inner + i] = (x->v[r * inner + i] - m) / sqrt(v + eps) * (g ? g->v[i] : 1) + (b ? b->v[i] : 0);
  }
  return o;
}

static Tensor *ev_batch_norm(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *mean = c->in[1], *var = c->in[2], *g = c->in[3], *b = c->in[4];
  double eps = scalar(c->in[5], "epsilon");
  if (x->rank < 3 || x->rank > 5) fail("x rank %d (3..5)", x->rank);
  int64_t outer, C, inner;
  around(x, 1, &outer, &C, &inner);
  if (mean->n != C || var->n != C || (g && g->n != C) || (b && b->n != C)) fail("statistics are not [C]");
  for (int i = 1; i < 6; i++)
    if (c->in[i]) same_float(x, c->in[i], "x/statistics");
  Tensor *o = tlike(x, x->dt);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t k = (a * C + ch) * inner + i;
        o->v[k] = (x->v[k] - mean->v[ch]) / sqrt(var->v[ch] + eps) * (g ? g->v[ch] : 1) + (b ? b->v[ch] : 0);
      }
  return o;
}

static Tensor *ev_reshape(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *s = c->in[1];
  if (s->dt != T_I32 || s->rank != 1) fail("shape must be int32 1-D");
  int64_t dim[MAXR], known = 1;
  int infer = -1;
  for (int64_t i = 0; i < s->n; i++) {
    dim[i] = (int64_t)s->v[i];
    if (dim[i] == 0 && s->n == x->rank) dim[i] = x->dim[i];
    if (dim[i] == -1) infer = (int)i;
    else known *= dim[i];
  }
  if (infer >= 0) dim[infer] = known ? x->n / known : 0;
  Tensor *o = tnew(x->dt, (int)s->n, dim);
  if (o->n != x->n) fail("reshape of %lld elements to %lld", (long long)x->n, (long long)o->n);
  memcpy(o->v, x->v, sizeof(double) * (size_t)x->n);
  return o;
}

static Tensor *ev_transpose(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0];
  int64_t perm[MAXR], od[MAXR], idx[MAXR], seen = 0;
  ints_of(c->in[1], x->rank, perm, "perm");
  for (int i = 0; i < x->rank; i++) {
    if (perm[i] < 0 || perm[i] >= x->rank || (seen & (1 << perm[i]))) fail("perm is not a permutation");
    seen |= 1 << perm[i];
    od[i] = x->dim[perm[i]];
  }
  Tensor *o = tnew(x->dt, x->rank, od);
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, x->rank, od, idx);
    int64_t off = 0, src[MAXR];
    for (int k = 0; k < x->rank; k++) src[perm[k]] = idx[k];
    for (int k = 0; k < x->rank; k++) off = off * x->dim[k] + src[k];
    o->v[i] = x->v[off];
  }
  return o;
}

static Tensor *ev_concat(Ctx *c, const char *type) {
  (void)type;
  Tensor *x0 = c->var[0];
  int ax = norm_axis(x0, scalar(c->in[1], "axis"));
  if (scalar(c->in[2], "interleave") != 0) fail("interleave true");
  int64_t od[MAXR];
  memcpy(od, x0->dim, sizeof od);
  od[ax] = 0;
  for (int i = 0; i < c->nvar; i++) {
    Tensor *t = c->var[i];
    if (t->dt != x0->dt || t->rank != x0->rank) fail("values differ in type or rank");
    for (int k = 0; k < t->rank; k++)
      if (k != ax && t->dim[k] != x0->dim[k]) fail("values differ off the axis");
    od[ax] += t->dim[ax];
  }
  Tensor *o = tnew(x0->dt, x0->rank, od);
  int64_t outer, n, inner, at = 0;
  around(o, ax, &outer, &n, &inner);
  for (int i = 0; i < c->nvar; i++) {
    Tensor *t = c->var[i];
    int64_t tn = t->dim[ax];
    for (int64_t a = 0; a < outer; a++)
      memcpy(o->v + (a * n + at) * inner, t->v + a * tn * inner, sizeof(double) * (size_t)(tn * inner));
    at += tn;
  }
  return o;
}

static Tensor *ev_slice(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0];
  int r = x->rank;
  int64_t b[MAXR], e[MAXR], s[MAXR], bm[MAXR], em[MAXR], sm[MAXR], od[MAXR], idx[MAXR];
  ints_of(c->in[1], r, b, "begin");
  ints_of(c->in[2], r, e, "end");
  ints_of(c->in[3], r, s, "stride");
  for (int i = 4; i <= 6; i++)
    if (!c->in[i] || c->in[i]->dt != T_BOOL || c->in[i]->n != r) fail("masks must be bool[%d]", r);
  for (int i = 0; i < r; i++) bm[i] = (int64_t)c->in[4]->v[i], em[i] = (int64_t)c->in[5]->v[i], sm[i] = (int64_t)c->in[6]->v[i];
  for (int i = 0; i < r; i++) {
    if (bm[i] || em[i] || sm[i]) fail("masks set (Kiln writes normalised bounds)");
    if (s[i] <= 0 || b[i] < 0 || e[i] > x->dim[i] || b[i] > e[i]) fail("bounds %lld:%lld:%lld on dim %d of %lld", (long long)b[i], (long long)e[i], (long long)s[i], i, (long long)x->dim[i]);
    od[i] = (e[i] - b[i] + s[i] - 1) / s[i];
  }
  Tensor *o = tnew(x->dt, r, od);
  for (int64_t i = 0; i < o->n; i++) {
    unravel(i, r, od, idx);
    int64_t off = 0;
    for (int k = 0; k < r; k++) off = off * x->dim[k] + b[k] + idx[k] * s[k];
    o->v[i] = x->v[off];
  }
  return o;
}

static Tensor *ev_gather(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *ix = c->in[1];
  if (x->dt == T_BOOL) fail("gather of bool data (not in the iOS15 type domain)");
  if (ix->dt != T_I32) fail("indices are %s", dt_name(ix->dt));
  int ax = norm_axis(x, scalar(c->in[2], "axis"));
  if (c->in[3] && scalar(c->in[3], "batch_dims") != 0) fail("batch_dims != 0");
  int64_t od[MAXR];
  int r = 0;
  for (int i = 0; i < ax; i++) od[r++] = x->dim[i];
  for (int i = 0; i < ix->rank; i++) od[r++] = ix->dim[i];
  for (int i = ax + 1; i < x->rank; i++) od[r++] = x->dim[i];
  Tensor *o = tnew(x->dt, r, od);
  int64_t outer, n, inner;
  around(x, ax, &outer, &n, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t j = 0; j < ix->n; j++) {
      int64_t k = (int64_t)ix->v[j];
      if (k < 0) k += n;
      if (k < 0 || k >= n) fail("index %lld out of range [0, %lld)", (long long)ix->v[j], (long long)n);
      memcpy(o->v + (a * ix->n + j) * inner, x->v + (a * n + k) * inner, sizeof(double) * (size_t)inner);
    }
  return o;
}

/* gather_along_axis: out[..i..] = x[..indices[..i..]..] along axis; indices of x's rank,
 * other dims equal; an index out of range is a failure (Kiln clamps before). */
static Tensor *ev_gather_along_axis(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *ix = c->in[1];
  if (x->dt == T_BOOL) fail("gather_along_axis of bool data (not in the iOS15 type domain)");
  if (ix->dt != T_I32) fail("indices are %s", dt_name(ix->dt));
  int ax = norm_axis(x, scalar(c->in[2], "axis"));
  if (ix->rank != x->rank) fail("indices rank %d, x rank %d", ix->rank, x->rank);
  for (int i = 0; i < x->rank; i++)
    if (i != ax && ix->dim[i] != x->dim[i]) fail("indices and x differ in dim %d", i);
  Tensor *o = tlike(ix, x->dt);
  int64_t outer, n, inner, ni = ix->dim[ax];
  around(x, ax, &outer, &n, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t j = 0; j < ni; j++)
      for (int64_t b = 0; b < inner; b++) {
        int64_t at = (a * ni + j) * inner + b, k = (int64_t)ix->v[at];
        if (k < 0 || k >= n) fail("index %lld out of range [0, %lld)", (long long)k, (long long)n);
        o->v[at] = x->v[(a * n + k) * inner + b];
      }
  return o;
}

/* scatter_along_axis (indices of updates' shape, per element) and scatter (a vector of
 * indices, one per slice of updates along axis), mode "update": data, then each update
 * stored in row-major order. MIL leaves duplicates and out-of-range indices open: here
 * the last duplicate wins, as in Kiln's kernels, and an index out of range fails (Kiln's
 * kernels skip it; the programs we check have none). */
static Tensor *ev_scatter(Ctx *c, const char *type) {
  Tensor *x = c->in[0], *ix = c->in[1], *u = c->in[2];
  int per_element = !strcmp(type, "scatter_along_axis");
  if (x->dt == T_BOOL || u->dt != x->dt) fail("data %s / updates %s", dt_name(x->dt), dt_name(u->dt));
  if (ix->dt != T_I32) fail("indices are %s", dt_name(ix->dt));
  if (!c->in[4] || !c->in[4]->s || strcmp(c->in[4]->s, "update") != 0) fail("mode (Kiln writes update)");
  int ax = norm_axis(x, scalar(c->in[3], "axis"));
  if (u->rank != x->rank) fail("updates rank %d, data rank %d", u->rank, x->rank);
  for (int i = 0; i < x->rank; i++)
    if (i != ax && u->dim[i] != x->dim[i]) fail("updates and data differ in dim %d", i);
  if (per_element ? ix->n != u->n : (ix->rank != 1 || ix->dim[0] != u->dim[ax])) fail("indices do not fit the updates");
  Tensor *o = tlike(x, x->dt);
  memcpy(o->v, x->v, sizeof(double) * (size_t)x->n);
  int64_t outer, n, inner, nu = u->dim[ax];
  around(x, ax, &outer, &n, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t j = 0; j < nu; j++)
      for (int64_t b = 0; b < inner; b++) {
        int64_t at = (a * nu + j) * inner + b, k = (int64_t)ix->v[per_element ? at : j];
        if (k < 0 || k >= n) fail("index %lld out of range [0, %lld)", (long long)k, (long long)n);
        o->v[(a * n + k) * inner + b] = u->v[at];
      }
  return o;
}

/* Does a come strictly before b: descending (largest first) or ascending, NaN above
 * every number. */
static int sort_before(double a, double b, int asc) {
  if (isnan(a) || isnan(b)) return asc ? isnan(b) && !isnan(a) : isnan(a) && !isnan(b);
  return asc ? a < b : a > b;
}

/* argsort: int32 indices ordering each line along axis. MIL leaves the order of equal
 * values and NaN open; this evaluator is stable (equal values by index) with NaN above
 * every number, Kiln's rule, so it checks the lowering, not Core ML's own choice.
 * An insertion sort: test lines are short. */
static Tensor *ev_argsort(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0];
  if (!is_float(x->dt)) fail("x is %s", dt_name(x->dt));
  int ax = norm_axis(x, c->in[1] ? scalar(c->in[1], "axis") : -1);
  int asc = c->in[2] ? (int)scalar(c->in[2], "ascending") : 0;
  Tensor *o = tlike(x, T_I32);
  int64_t outer, n, inner;
  around(x, ax, &outer, &n, &inner);
  int64_t *ix = xalloc(sizeof(int64_t) * (size_t)n);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) {
      const double *line = x->v + a * n * inner + b;
      for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        while (j > 0 && sort_before(line[i * inner], line[ix[j - 1] * inner], asc)) ix[j] = ix[j - 1], j--;
        ix[j] = i;
      }
      for (int64_t i = 0; i < n; i++) o->v[(a * n + i) * inner + b] = (double)ix[i];
    }
  return o;
}

/* ---- state ---- */

/* The state store of the function being run: one fp16 tensor per state input, read and
 * written by read_state / write_state, loaded before and saved after a call. */
static Tensor **store;
static int nstore;

static Tensor *tcopy(const Tensor *t) {
  Tensor *o = tlike(t, t->dt);
  memcpy(o->v, t->v, sizeof(double) * (size_t)t->n);
  return o;
}

static Tensor *ev_read_state(Ctx *c, const char *type) {
  (void)type;
  return tcopy(store[c->in[0]->state - 1]);
}

/* Stores data into the state; the data must be exactly the wrapped type (fp16, same shape). */
static Tensor *ev_write_state(Ctx *c, const char *type) {
  (void)type;
  Tensor *st = store[c->in[0]->state - 1], *d = c->in[1];
  if (d->dt != st->dt || d->rank != st->rank) fail("data is %s rank %d, the state %s rank %d", dt_name(d->dt), d->rank, dt_name(st->dt), st->rank);
  for (int i = 0; i < d->rank; i++)
    if (d->dim[i] != st->dim[i]) fail("data shape differs from the state's");
  store[c->in[0]->state - 1] = tcopy(d);
  return NULL;
}

/* x with x[begin:end:stride] = update (masks all false, as Kiln writes them); the slice
 * must lie inside x (Core ML does not define the rest) and have update's shape. */
static Tensor *ev_slice_update(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *u = c->in[1];
  same_float(x, u, "x/update");
  int r = x->rank;
  int64_t b[MAXR], e[MAXR], s[MAXR], idx[MAXR];
  ints_of(c->in[2], r, b, "begin");
  ints_of(c->in[3], r, e, "end");
  for (int i = 0; i < r; i++) s[i] = 1;
  if (c->in[4]) ints_of(c->in[4], r, s, "stride");
  for (int i = 5; i <= 7; i++) {
    if (!c->in[i]) continue;
    if (c->in[i]->dt != T_BOOL || c->in[i]->n != r) fail("masks must be bool[%d]", r);
    for (int k = 0; k < r; k++)
      if (c->in[i]->v[k] != 0) fail("masks set (Kiln writes explicit bounds)");
  }
  if (u->rank != r || r == 0) fail("update rank %d for x rank %d", u->rank, r);
  for (int i = 0; i < r; i++) {
    if (s[i] <= 0 || b[i] < 0 || e[i] > x->dim[i] || b[i] > e[i])
      fail("slice %lld:%lld:%lld on dim %d of %lld is outside x", (long long)b[i], (long long)e[i], (long long)s[i], i, (long long)x->dim[i]);
    if ((e[i] - b[i] + s[i] - 1) / s[i] != u->dim[i]) fail("update dim %d is %lld, the slice's %lld", i, (long long)u->dim[i], (long long)((e[i] - b[i] + s[i] - 1) / s[i]));
  }
  Tensor *o = tcopy(x);
  for (int64_t i = 0; i < u->n; i++) {
    unravel(i, r, u->dim, idx);
    int64_t off = 0;
    for (int k = 0; k < r; k++) off = off * x->dim[k] + b[k] + idx[k] * s[k];
    o->v[off] = u->v[i];
  }
  return o;
}

/* ---- running the program ---- */

/* ---- iOS18 compressed weights (semantics from coremltools' op definitions) ---- */

/* The flat index into a block-wise parameter p (same rank as x, each of x's dims a
 * multiple of p's) of x's element i: dimension d's block is x.dim[d] / p.dim[d] long. */
static int64_t block_index(const Tensor *x, const Tensor *p, int64_t i) {
  int64_t idx[MAXR], off = 0;
  unravel(i, x->rank, x->dim, idx);
  for (int d = 0; d < x->rank; d++) off = off * p->dim[d] + idx[d] / (x->dim[d] / p->dim[d]);
  return off;
}

/* Checks that p has x's rank and that each of x's dims is a whole number of p's. */
static void check_blocks(const Tensor *x, const Tensor *p, const char *what) {
  if (p->rank != x->rank || x->rank < 1) fail("%s: rank %d for data of rank %d", what, p->rank, x->rank);
  for (int d = 0; d < x->rank; d++)
    if (p->dim[d] < 1 || x->dim[d] % p->dim[d]) fail("%s: dim %d is %lld, not a divisor of %lld", what, d, (long long)p->dim[d], (long long)x->dim[d]);
}

/* constexpr_blockwise_shift_scale: output = scale * (data - offset) per block, of the
 * scale's type (fp16/fp32) and data's shape; data int4/uint4/int8/uint8/fp16/fp32, offset
 * (optional) of the scale's shape and float or data's type. Each step is rounded to the
 * output type, as coremltools' reference decompress does it in numpy (the subtraction is
 * exact for the integers Kiln writes). The result is a compile-time constant. */
static Tensor *ev_shift_scale(Ctx *c, const char *type) {
  (void)type;
  Tensor *x = c->in[0], *sc = c->in[1], *of = c->in[2];
  if (!is_packed(x->dt) && !is_float(x->dt)) fail("data is %s", dt_name(x->dt));
  if (!is_float(sc->dt)) fail("scale is %s (fp16 or fp32)", dt_name(sc->dt));
  check_blocks(x, sc, "scale");
  if (of) {
    check_blocks(x, of, "offset");
    for (int d = 0; d < of->rank; d++)
      if (of->dim[d] != sc->dim[d]) fail("offset and scale shapes differ");
    if (!is_float(of->dt) && of->dt != x->dt) fail("offset is %s, data %s", dt_name(of->dt), dt_name(x->dt));
  }
  Tensor *o = tlike(x, sc->dt);
  for (int64_t i = 0; i < x->n; i++) {
    int64_t b = block_index(x, sc, i);
    double v = round_to(sc->dt, x->v[i]);
    if (of) v = round_to(sc->dt, v - round_to(sc->dt, of->v[b]));
    o->v[i] = sc->v[b] * v;
  }
  o->is_const = 1;
  return o;
}

/* constexpr_lut_to_dense (iOS18): indices uint1..uint8 of rank r, lut of rank r + 2 whose
 * first r dims divide the indices' (one table per block), then 2^bits entries, then the
 * vector size (only 1 here: Kiln writes scalar tables); output of the lut's type
 * (int8/uint8/fp16/fp32) and the indices' shape. A compile-time constant. */
static Tensor *ev_lut(Ctx *c, const char *type) {
  (void)type;
  Tensor *ix = c->in[0], *lut = c->in[1];
  if (ix->dt != T_U4 && ix->dt != T_U8) fail("indices are %s (Kiln writes uint4 or uint8)", dt_name(ix->dt));
  if (!is_float(lut->dt)) fail("lut is %s (Kiln writes fp16 or fp32 tables)", dt_name(lut->dt));
  if (lut->rank != ix->rank + 2) fail("lut rank %d for indices of rank %d", lut->rank, ix->rank);
  if (lut->dim[ix->rank] != 1 << bits_of(ix->dt)) fail("lut has %lld entries for %d-bit indices", (long long)lut->dim[ix->rank], bits_of(ix->dt));
  if (lut->dim[ix->rank + 1] != 1 || c->in[2]) fail("vector palettization (not used by Kiln, not evaluated here)");
  Tensor tables = *lut;
  tables.rank = ix->rank;
  check_blocks(ix, &tables, "lut");
  Tensor *o = tlike(ix, lut->dt);
  for (int64_t i = 0; i < ix->n; i++) o->v[i] = lut->v[block_index(ix, &tables, i) * lut->dim[ix->rank] + (int64_t)ix->v[i]];
  o->is_const = 1;
  return o;
}

static const OpDef *find_def(const char *type) {
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
    if (!strcmp(defs[i].type, type)) return &defs[i];
  return NULL;
}

static Tensor *lookup(const CoreML__Specification__MILSpec__Argument__Binding *b) {
  if (b->binding_case != CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME) fail("an inline value binding (Kiln binds by name)");
  Tensor *t = vget(b->name);
  if (!t) fail("'%s' is used before it is defined", b->name);
  return t;
}

/* Binds the op's inputs to its signature, checking the parameter rules. */
static void bind(const Op *op, const OpDef *d, Ctx *c) {
  for (size_t i = 0; i < op->n_inputs; i++) {
    const char *k = op->inputs[i]->key;
    int found = 0;
    for (int p = 0; d->p[p].name; p++) found |= !strcmp(d->p[p].name, k);
    if (!found) fail("unknown parameter '%s'", k);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(op->inputs[j]->key, k)) fail("parameter '%s' bound twice", k);
  }
  for (int p = 0; d->p[p].name; p++) {
    const Param *pp = &d->p[p];
    const CoreML__Specification__MILSpec__Argument *arg = NULL;
    for (size_t i = 0; i < op->n_inputs; i++)
      if (!strcmp(op->inputs[i]->key, pp->name)) arg = op->inputs[i]->value;
    if (arg && spec < pp->from) fail("parameter '%s' needs spec >= %d", pp->name, pp->from);
    if (!arg) {
      if ((pp->f & REQ) || ((pp->f & DEF) && spec >= pp->from)) fail("parameter '%s' missing (%s)", pp->name, pp->f & REQ ? "required" : "optional with a default: Kiln writes it");
      continue;
    }
    if (arg->n_arguments < 1 || (!(pp->f & VAR) && arg->n_arguments != 1)) fail("parameter '%s' has %zu bindings", pp->name, arg->n_arguments);
    if (pp->f & VAR) {
      c->nvar = (int)arg->n_arguments;
      c->var = xalloc(sizeof *c->var * arg->n_arguments);
      for (size_t i = 0; i < arg->n_arguments; i++) c->var[i] = lookup(arg->arguments[i]);
      c->in[p] = c->var[0];
    } else {
      c->in[p] = lookup(arg->arguments[0]);
    }
    if ((pp->f & CONST) && !c->in[p]->is_const) fail("parameter '%s' must come from a const op", pp->name);
    if (is_packed(c->in[p]->dt) && strncmp(op->type, "constexpr_", 10) != 0)
      fail("parameter '%s' is %s, which only a constexpr op reads", pp->name, dt_name(c->in[p]->dt));
    if (!(pp->f & STATE) != !c->in[p]->state)
      fail("parameter '%s' %s", pp->name, pp->f & STATE ? "must be a state input" : "is a state: only read_state/write_state take one");
    for (int i = 0; (pp->f & VAR) && i < c->nvar; i++)
      if (c->var[i]->state) fail("parameter '%s' is a state: only read_state/write_state take one", pp->name);
  }
}

static const char *op_name_attr(const Op *op) {
  if (op->n_attributes < 1 || strcmp(op->attributes[0]->key, "name") != 0) fail("op of type %s has no leading `name` attribute", op->type);
  Tensor *t = const_value(op->attributes[0]->value);
  if (t->dt != T_STR) fail("`name` attribute is not a string");
  return t->s;
}

static const char *dump_dir;   /* -V: where compile-time constants are written */
static void write_npy(const char *path, const Tensor *t);

static void run_op(const Op *op) {
  cur_op = op_name_attr(op);
  if (!strcmp(op->type, "coreml_update_state"))
    fail("coreml_update_state is coremltools' builder op: a saved program holds write_state (then read_state)");
  size_t nout = strcmp(op->type, "write_state") == 0 ? 0 : 1;
  if (op->n_outputs != nout) fail("%zu outputs (a %s op has %zu)", op->n_outputs, op->type, nout);
  if (op->n_blocks) fail("nested blocks");
  if (!nout) {   /* write_state: a side effect only */
    if (op->n_attributes != 1) fail("attributes other than name on a %s op", op->type);
    const OpDef *d = find_def(op->type);
    if (spec < op_from(op->type)) fail("op %s needs spec >= %d", op->type, op_from(op->type));
    Ctx c = {.op = op};
    bind(op, d, &c);
    d->fn(&c, op->type);
    cur_op = "";
    return;
  }
  const char *out = op->outputs[0]->name;
  if (!is_ident(out) || is_keyword(out)) fail("output name '%s' is not a MIL identifier or is a keyword", out);
  const TType *tt = tensor_type(op->outputs[0]->type, "output type");
  Tensor *r;
  if (!strcmp(op->type, "const")) {
    if (op->n_inputs) fail("const op with inputs");
    if (op->n_attributes != 2 || strcmp(op->attributes[1]->key, "val") != 0) fail("const op attributes are not exactly name, val");
    r = const_value(op->attributes[1]->value);
  } else {
    if (op->n_attributes != 1) fail("attributes other than name on a %s op", op->type);
    const OpDef *d = find_def(op->type);
    if (!d) fail("op type '%s' is not one the interpreter knows", op->type);
    if (spec < op_from(op->type)) fail("op %s needs spec >= %d", op->type, op_from(op->type));
    Ctx c = {.op = op};
    bind(op, d, &c);
    r = d->fn(&c, op->type);
    for (int64_t i = 0; i < r->n; i++) r->v[i] = round_to(r->dt, r->v[i]);
  }
  if (!type_matches(tt, r)) {
    char got[128];
    shape_str(r, got, sizeof got);
    fail("declared output type does not match the computed %s %s", dt_name(r->dt), got);
  }
  if (dump_dir && r->is_const && is_float(r->dt) && r->n >= 10) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dump_dir, out);
    write_npy(path, r);
  }
  vput(out, r);
  cur_op = "";
}

/* ---- .npy ---- */

static Tensor *read_npy(const char *path, DT want, const TType *tt) {
  size_t len;
  uint8_t *d = read_file(path, &len);
  if (!d) fail("cannot read %s", path);
  if (len < 10 || memcmp(d, "\x93NUMPY", 6) != 0) fail("%s: not .npy", path);
  size_t hl = d[6] == 1 ? (size_t)(d[8] | d[9] << 8) : (size_t)rd32(d + 8), start = (d[6] == 1 ? 10 : 12) + hl;
  char *h = xalloc(hl + 1);
  memcpy(h, d + (d[6] == 1 ? 10 : 12), hl);
  const char *descr = want == T_F32 ? "'<f4'" : "'<i4'";
  if (!strstr(h, descr)) fail("%s: want %s, header %s", path, descr, h);
  Tensor *t = from_type(tt);
  if (len - start != (size_t)t->n * 4) fail("%s: %zu data bytes for %lld elements", path, len - start, (long long)t->n);
  for (int64_t i = 0; i < t->n; i++) {
    uint32_t u = rd32(d + start + 4 * i);
    if (want == T_F32) {
      float f;
      memcpy(&f, &u, 4);
      t->v[i] = f;
    } else {
      t->v[i] = (int32_t)u;
    }
  }
  return t;
}

static void write_npy(const char *path, const Tensor *t) {
  char hdr[256], shp[160] = "";
  size_t k = 0;
  for (int i = 0; i < t->rank; i++) k += (size_t)snprintf(shp + k, sizeof shp - k, "%lld,%s", (long long)t->dim[i], i + 1 < t->rank ? " " : "");
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", t->dt == T_I32 ? "<i4" : "<f4", shp);
  int pad = (64 - (10 + n + 1) % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) fail("cannot write %s", path);
  unsigned hl = (unsigned)(n + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc((int)(hl & 0xff), f);
  fputc((int)(hl >> 8), f);
  fwrite(hdr, 1, (size_t)n, f);
  for (int i = 0; i < pad; i++) fputc(' ', f);
  fputc('\n', f);
  for (int64_t i = 0; i < t->n; i++) {
    if (t->dt == T_I32) {
      int32_t v = (int32_t)t->v[i];
      fwrite(&v, 4, 1, f);
    } else {
      float v = (float)t->v[i];
      fwrite(&v, 4, 1, f);
    }
  }
  fclose(f);
}

/* ---- the model ---- */

typedef CoreML__Specification__FeatureDescription Feature;
typedef CoreML__Specification__MILSpec__NamedValueType Named;

static const char *opset_for(int sv) {
  static const char *const o[] = {"CoreML5", "CoreML6", "CoreML7", "CoreML8"};
  return sv >= 6 && sv <= 9 ? o[sv - 6] : NULL;
}

/* Checks a description feature against a function input / block output. */
static DT feature_type(const Feature *f, const TType **out_tt, const TType *tt) {
  if (!f->type || f->type->type_case != CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE) fail("feature %s is not a multi-array", f->name);
  const CoreML__Specification__ArrayFeatureType *a = f->type->multiarraytype;
  DT d = a->datatype == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32 ? T_F32
       : a->datatype == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32 ? T_I32 : 0;
  if (!d) fail("feature %s: array data type %d (Kiln writes FLOAT32/INT32)", f->name, (int)a->datatype);
  if (tt) {
    if ((int)tt->datatype != (int)d || (int64_t)a->n_shape != tt->rank) fail("feature %s: description and program types differ", f->name);
    for (size_t i = 0; i < a->n_shape; i++)
      if ((uint64_t)a->shape[i] != tt->dimensions[i]->constant->size) fail("feature %s: description and program shapes differ", f->name);
  }
  if (out_tt) *out_tt = tt;
  return d;
}

static int is_state_input(const Named *nv) {
  return nv->type && nv->type->type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE;
}

/* A state input's wrapped tensor type: state<tensor<fp16, shape>> (Core ML states are fp16). */
static const TType *state_type(const Named *nv) {
  const CoreML__Specification__MILSpec__StateType *st = nv->type->statetype;
  if (!st || !st->wrappedtype) fail("state input %s wraps no type", nv->name);
  const TType *tt = tensor_type(st->wrappedtype, "state type");
  if ((int)tt->datatype != T_F16) fail("state input %s wraps %s (Core ML states hold fp16)", nv->name, dt_name((DT)tt->datatype));
  return tt;
}

/* A description state feature equals the state input: same name, StateFeatureType holding
 * a FLOAT16 array of the same shape (as coremltools writes it). */
static void check_state_feature(const Feature *f, const Named *nv) {
  if (strcmp(f->name, nv->name) != 0) fail("state %s vs description %s", nv->name, f->name);
  if (!f->type || f->type->type_case != CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE ||
      f->type->statetype->type_case != CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE)
    fail("state feature %s is not a StateFeatureType holding an array", f->name);
  const CoreML__Specification__ArrayFeatureType *a = f->type->statetype->arraytype;
  const TType *tt = state_type(nv);
  if (a->datatype != CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16) fail("state feature %s is not FLOAT16", f->name);
  if ((int64_t)a->n_shape != tt->rank) fail("state %s: description and program ranks differ", f->name);
  for (size_t i = 0; i < a->n_shape; i++)
    if ((uint64_t)a->shape[i] != tt->dimensions[i]->constant->size) fail("state %s: description and program shapes differ", f->name);
}

/* One function's description: from ModelDescription (one function, "main") or one of its
 * FunctionDescriptions (a multifunction model). */
typedef struct {
  const char *name;
  Feature **in, **out, **st;
  size_t nin, nout, nst;
} FnDesc;

/* Validates function fn against its description and evaluates it: inputs from IN/<name>.npy
 * (zeros when in_dir is NULL: enough to type-check every op), states from SIN/<state>.npy
 * (f32 files of fp16 values; zeros, a fresh state, when sin is NULL); writes the outputs to
 * OUT and the states after the call to SOUT when given. */
static void run_function(const CoreML__Specification__MILSpec__Function *fn, const FnDesc *fd, const char *opset,
                         const char *in_dir, const char *out_dir, const char *sin, const char *sout) {
  char path[4096];
  if (strcmp(fn->opset, opset) != 0) fail("function %s: opset %s for spec %d (want %s)", fd->name, fn->opset, spec, opset);
  if (fn->n_block_specializations != 1 || strcmp(fn->block_specializations[0]->key, opset) != 0) fail("block_specializations is not {%s}", opset);
  if (fn->n_attributes) fail("function attributes set");
  const CoreML__Specification__MILSpec__Block *blk = fn->block_specializations[0]->value;
  if (blk->n_inputs || blk->n_attributes) fail("function %s: block has inputs or attributes", fd->name);
  if (blk->n_outputs != fd->nout) fail("function %s: description and program disagree on the number of outputs", fd->name);
  memset(&vals, 0, sizeof vals);     /* names are scoped to a function; the old table stays in allocs */
  size_t ni = 0, ns = 0;
  store = xalloc(sizeof *store * (fn->n_inputs + 1));
  nstore = 0;
  for (size_t i = 0; i < fn->n_inputs; i++) {
    const Named *nv = fn->inputs[i];
    if (is_state_input(nv)) {    /* coremltools' order: states are function inputs, described apart */
      if (spec < 9) fail("state input %s needs spec >= 9", nv->name);
      if (ns >= fd->nst) fail("function %s: more state inputs than the description's states", fd->name);
      check_state_feature(fd->st[ns++], nv);
      const TType *tt = state_type(nv);
      Tensor *st = from_type(tt);
      if (sin) {
        snprintf(path, sizeof path, "%s/%s.npy", sin, nv->name);
        st = read_npy(path, T_F32, tt);
        for (int64_t k = 0; k < st->n; k++)
          if (round_f16(st->v[k]) != st->v[k]) fail("%s: element %lld is not an fp16 value", path, (long long)k);
      }
      store[nstore++] = st;
      Tensor *h = from_type(tt);
      h->state = nstore;
      vput(nv->name, h);
      continue;
    }
    if (ni >= fd->nin) fail("function %s: more inputs than the description's", fd->name);
    if (strcmp(nv->name, fd->in[ni]->name) != 0) fail("input %zu: %s vs description %s", ni, nv->name, fd->in[ni]->name);
    const TType *tt = tensor_type(nv->type, "function input");
    DT want = feature_type(fd->in[ni++], NULL, tt);
    Tensor *t;
    if (in_dir) {
      snprintf(path, sizeof path, "%s/%s.npy", in_dir, nv->name);
      t = read_npy(path, want, tt);
    } else {
      t = from_type(tt);
    }
    vput(nv->name, t);
  }
  if (ni != fd->nin || ns != fd->nst) fail("function %s: description and program disagree on inputs/states", fd->name);
  for (size_t i = 0; i < blk->n_operations; i++) run_op(blk->operations[i]);
  for (size_t i = 0; i < blk->n_outputs; i++) {
    const char *name = blk->outputs[i];
    if (strcmp(name, fd->out[i]->name) != 0) fail("output %zu: %s vs description %s", i, name, fd->out[i]->name);
    Tensor *t = vget(name);
    if (!t) fail("block output %s is not defined", name);
    if (t->state) fail("output %s is a state input", name);
    for (size_t k = 0; k < fn->n_inputs; k++)
      if (!strcmp(fn->inputs[k]->name, name)) fail("output %s is a function input returned unchanged", name);
    DT want = feature_type(fd->out[i], NULL, NULL);
    if (t->dt != want) fail("output %s is %s, described as %s", name, dt_name(t->dt), dt_name(want));
    const CoreML__Specification__ArrayFeatureType *a = fd->out[i]->type->multiarraytype;
    if ((int)a->n_shape != t->rank) fail("output %s: rank differs from the description", name);
    for (int k = 0; k < t->rank; k++)
      if (a->shape[k] != t->dim[k]) fail("output %s: shape differs from the description", name);
    if (out_dir) {
      snprintf(path, sizeof path, "%s/%s.npy", out_dir, name);
      write_npy(path, t);
    }
  }
  for (int k = 0; sout && k < nstore; k++) {
    snprintf(path, sizeof path, "%s/%s.npy", sout, fd->st[k]->name);
    write_npy(path, store[k]);
  }
  printf("ok %s: spec %d, function %s, %zu ops, %d states\n", pkg, spec, fd->name, blk->n_operations, nstore);
}

/* Prints function fd's signature: "in|out NAME fp32|int32 D0,D1,..." and "state NAME fp16 D0,...". */
static void print_sig(const FnDesc *fd) {
  for (int io = 0; io < 3; io++)
    for (size_t i = 0; i < (io == 0 ? fd->nin : io == 1 ? fd->nout : fd->nst); i++) {
      const Feature *f = io == 0 ? fd->in[i] : io == 1 ? fd->out[i] : fd->st[i];
      const CoreML__Specification__ArrayFeatureType *a;
      if (io == 2) {
        if (!f->type || f->type->type_case != CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE) fail("state %s is not a state feature", f->name);
        a = f->type->statetype->arraytype;
        printf("state %s fp16 ", f->name);
      } else {
        printf("%s %s %s ", io ? "out" : "in", f->name, dt_name(feature_type(f, NULL, NULL)));
        a = f->type->multiarraytype;
      }
      for (size_t k = 0; k < a->n_shape; k++) printf("%s%lld", k ? "," : "", (long long)a->shape[k]);
      printf("\n");
    }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: milrun PKG.mlpackage sig [FUNCTION] | check | run IN OUT [-f FUNCTION] [-s STATE_IN] [-S STATE_OUT] [-V DIR]\n");
    return 2;
  }
  pkg = argv[1];
  atexit(free_all);
  const char *cmd = argv[2];
  char path[4096];
  snprintf(path, sizeof path, "%s/Data/com.apple.CoreML/model.mlmodel", pkg);
  size_t len;
  uint8_t *bytes = read_file(path, &len);
  if (!bytes) fail("cannot read %s", path);
  CoreML__Specification__Model *m = core_ml__specification__model__unpack(NULL, len, bytes);
  if (!m) fail("model.mlmodel does not parse as CoreML.Specification.Model");
  unpacked = m;
  spec = m->specificationversion;
  const char *opset = opset_for(spec);
  if (!opset) fail("specificationVersion %d (Kiln writes 6..9)", spec);
  if (m->type_case != CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM) fail("not an mlProgram");
  const CoreML__Specification__MILSpec__Program *p = m->mlprogram;
  const CoreML__Specification__ModelDescription *d = m->description;
  if (!d) fail("no description");
  if (p->version != 1 || p->n_functions < 1) fail("program is not version 1 with functions");
  if (*p->docstring || p->n_attributes) fail("program docString/attributes set");
  /* One FnDesc per program function, in the program's order. */
  FnDesc *fds = xalloc(sizeof *fds * p->n_functions);
  size_t deflt = 0;
  if (d->n_functions) {      /* multifunction (iOS18): description per function, top level empty */
    if (spec < 9) fail("a multifunction description needs spec >= 9");
    if (d->n_input || d->n_output || d->n_state) fail("a multifunction description with top-level inputs/outputs/states");
    if (d->n_functions != p->n_functions) fail("%zu function descriptions for %zu functions", d->n_functions, p->n_functions);
    int found = 0;
    for (size_t i = 0; i < p->n_functions; i++) {   /* Program.functions is a map: match by name */
      const char *name = p->functions[i]->key;
      const CoreML__Specification__FunctionDescription *f = NULL;
      for (size_t k = 0; k < d->n_functions; k++)
        if (!strcmp(d->functions[k]->name, name)) {
          if (f) fail("function %s is described twice", name);
          f = d->functions[k];
        }
      if (!f) fail("function %s has no description", name);
      for (size_t k = 0; k < i; k++)
        if (!strcmp(p->functions[k]->key, name)) fail("function %s defined twice", name);
      if (!is_ident(name)) fail("function name '%s' is not an identifier", name);
      fds[i] = (FnDesc){f->name, f->input, f->output, f->state, f->n_input, f->n_output, f->n_state};
      if (!strcmp(name, d->defaultfunctionname)) found = 1, deflt = i;
    }
    if (!found) fail("defaultFunctionName '%s' names no function", d->defaultfunctionname);
  } else {
    if (p->n_functions != 1 || strcmp(p->functions[0]->key, "main") != 0) fail("a single-function description but the program is not one function main");
    if (*d->defaultfunctionname) fail("defaultFunctionName without function descriptions");
    if (d->n_state && spec < 9) fail("states need spec >= 9");
    fds[0] = (FnDesc){"main", d->input, d->output, d->state, d->n_input, d->n_output, d->n_state};
  }
  const char *only = NULL, *in_dir = NULL, *out_dir = NULL, *sin = NULL, *sout = NULL;
  int run = !strcmp(cmd, "run"), a = 3;
  if (!strcmp(cmd, "sig")) {
    only = argc > 3 ? argv[3] : fds[deflt].name;
    a = argc > 3 ? 4 : 3;
  } else if (run) {
    if (argc < 5) fail("run needs IN and OUT directories");
    in_dir = argv[3], out_dir = argv[4], a = 5;
    only = fds[deflt].name;
  } else if (strcmp(cmd, "check") != 0) {
    fail("unknown command %s", cmd);
  }
  for (; a + 1 < argc; a += 2) {
    if (!strcmp(argv[a], "-f")) only = argv[a + 1];
    else if (!strcmp(argv[a], "-s")) sin = argv[a + 1];
    else if (!strcmp(argv[a], "-S")) sout = argv[a + 1];
    else if (!strcmp(argv[a], "-V")) dump_dir = argv[a + 1];
    else fail("unknown option %s", argv[a]);
  }
  if (a < argc) fail("option %s needs a value", argv[a]);
  if (strcmp(cmd, "sig") != 0) load_weights();
  int ran = 0;
  for (size_t i = 0; i < p->n_functions; i++) {
    if (only && strcmp(only, fds[i].name) != 0) continue;
    ran = 1;
    if (!strcmp(cmd, "sig")) print_sig(&fds[i]);
    else run_function(p->functions[i]->value, &fds[i], opset, in_dir, out_dir, sin, sout);
  }
  if (!ran) fail("no function named %s", only);
  return 0;
}
