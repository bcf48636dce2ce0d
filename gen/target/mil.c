/*
 * mil.c — building an ML Program (MIL) as protobuf-c structs, and its weight file.
 *
 * Shape of the code: one Mil holds the functions (one per entry point; "main" for
 * a model with one), each with its growing op list and the set of names it uses,
 * and the weight.bin bytes they share. Every struct
 * comes from Kiln's arena (kiln_alloc), so nothing is freed piecemeal and an
 * error exit leaks nothing. Arrays grow by doubling into fresh arena blocks.
 *
 * Conventions followed (docs/coreml.md, shared/reference/coreml-format.md):
 *  - every op carries the attribute `name`; a const op carries `name` and `val`
 *    and nothing else; op name and output name are the same identifier;
 *  - float tensors of >= MIL_BLOB_MIN_ELEMS elements go to weight.bin (as fp16 or
 *    fp32, matching the tensor type); everything else is an immediate value:
 *    f32 in `floats`, f16 as raw halves in `bytes`, i32 in `ints`, bool in `bools`;
 *  - weight.bin is MILBlob storage version 2: a 64-byte header {count, version 2},
 *    then per blob a 64-byte metadata {0xDEADBEEF, dtype code, size, absolute data
 *    offset} at a 64-aligned offset followed directly by the payload. The proto's
 *    BlobFileValue.offset is the offset of the metadata, not of the data.
 */
#include "mil.h"

#include <string.h>

typedef CoreML__Specification__MILSpec__Value MilValue;
typedef CoreML__Specification__MILSpec__ValueType MilValueType;
typedef CoreML__Specification__MILSpec__TensorType MilTensorType;
typedef CoreML__Specification__MILSpec__TensorValue MilTensorValue;
typedef CoreML__Specification__MILSpec__NamedValueType MilNamed;
typedef CoreML__Specification__MILSpec__Dimension MilDim;
typedef CoreML__Specification__MILSpec__Argument MilArgument;
typedef CoreML__Specification__MILSpec__Argument__Binding MilBinding;

/* MILBlob dtype codes (BlobDataType; not MIL DataType numbers). */
enum { BLOB_F16 = 1, BLOB_F32 = 2, BLOB_U8 = 3, BLOB_I8 = 4, BLOB_I4 = 8, BLOB_U4 = 11 };

static const char blob_file[] = "@model_path/weights/weight.bin";

/* One MIL function: its signature, its ops and its own name space (MIL names are
 * scoped to a function: two entry points may both have a `logits`). */
typedef struct {
  const char *name;
  MilNamed **inputs;
  int ninputs, capinputs;
  char **outputs;
  int noutputs, capoutputs;
  MilOp **ops;
  int nops, capops;
  StrMap names;                  /* every identifier in use */
  StrMap next;                   /* per mil_fresh base: the clash suffix to try next */
} MilFn;

struct Mil {
  const char *opset;
  MilFn **fns;                   /* in creation order, the last one being built */
  int nfns, capfns;
  MilFn *f;                      /* the function being built */
  Buf wb;                        /* weight.bin; data lives in the arena (see wb_reserve) */
  int nblobs;
  bool share;                    /* mil_share_blobs: identical payloads are stored once */
  StrMap blobs;                  /* with share: "code/size/fnv" -> 1 + metadata offset */
};

/* Returns p, grown (into a fresh arena block) to hold at least n + 1 elements. */
static void *grow(void *p, int n, int *cap, size_t elem) {
  if (n < *cap) return p;
  int nc = *cap ? *cap * 2 : 16;
  void *q = kiln_alloc((size_t)nc * elem);
  if (n) memcpy(q, p, (size_t)n * elem);
  *cap = nc;
  return q;
}

/* A fresh, empty program builder in the arena for the given opset ("CoreML7"); the string is
 * kept, not copied. Call mil_function before adding anything. */
Mil *mil_new(const char *opset) {
  Mil *m = kiln_alloc(sizeof *m);
  m->opset = opset;
  return m;
}

/* Starts function `name` (a copy is kept): every name, input, op and output from here on
 * belongs to it. Functions keep their creation order in the Program. */
void mil_function(Mil *m, const char *name) {
  MilFn *f = kiln_alloc(sizeof *f);
  f->name = kiln_strdup(name);
  m->fns = grow(m->fns, m->nfns, &m->capfns, sizeof *m->fns);
  m->fns[m->nfns++] = f;
  m->f = f;
}

/* From now on a blob whose dtype and bytes equal an earlier one's is not written again: the
 * const points at the first copy (what coremltools does for weights shared by functions). */
void mil_share_blobs(Mil *m) { m->share = true; }

/* ---- names ---- */

static const char *const keywords[] = {
    "any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true", "false", "string",
    "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "state",
};

/* True when s is one of MIL's reserved type or syntax words, which no value may be named. */
bool mil_is_keyword(const char *s) {
  for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
    if (strcmp(s, keywords[i]) == 0) return true;
  return false;
}

/* Whether c may appear in a MIL identifier: letters, '_', and digits except in first place. */
static bool ident_char(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

/* The stricter of the two identifier rules (coremltools' [A-Za-z_][A-Za-z0-9_]*). */
bool mil_is_ident(const char *s) {
  if (!*s) return false;
  for (const char *p = s; *p; p++)
    if (!ident_char(*p, p == s)) return false;
  return true;
}

/* Whether s is already a name in the program (any op, input or claimed output). */
static bool name_taken(const Mil *m, const char *s) { return strmap_get(&m->f->names, s) != NULL; }

/* Adds s to the names in use. */
static void name_add(Mil *m, const char *s) { strmap_put(&m->f->names, s); }

/* Reserves name exactly as given (user input/output names must survive); false, reserving
 * nothing, when it is not a valid identifier, is a keyword, or is already taken. */
bool mil_claim(Mil *m, const char *name) {
  if (!mil_is_ident(name) || mil_is_keyword(name) || name_taken(m, name)) return false;
  name_add(m, kiln_strdup(name));
  return true;
}

/* base as an identifier: invalid characters become '_', a leading digit or an empty base
 * gets "v_", a keyword a trailing '_'. Arena string. */
char *mil_sanitize(const char *base) {
  size_t n = strlen(base);
  char *s = kiln_alloc(n + 4);
  size_t k = 0;
  if (n == 0 || (base[0] >= '0' && base[0] <= '9')) {
    memcpy(s, "v_", 2);
    k = 2;
  }
  for (size_t i = 0; i < n; i++) s[k++] = ident_char(base[i], false) ? base[i] : '_';
  if (mil_is_keyword(s)) s[k++] = '_';
  return s;
}

/* A new unique identifier derived from base: invalid characters become '_', a leading digit
 * or empty base gets "v_", a keyword gets a trailing '_', a clash gets "_1", "_2", ...; reserved.
 * The suffix search resumes where the last one for the same base stopped: names are never
 * released, so every lower suffix is still taken and the result is the first free one,
 * as a search from 1 would find, in time linear in the number of names. */
const char *mil_fresh(Mil *m, const char *base) {
  char *s = mil_sanitize(base);
  const char *name = s;
  int *next = strmap_put(&m->f->next, s);
  int i = *next ? *next : 1;
  if (name_taken(m, name))
    for (name = kiln_fmt("%s_%d", s, i); name_taken(m, name); name = kiln_fmt("%s_%d", s, ++i)) {}
  *next = name == s ? 1 : i + 1;
  name_add(m, name);
  return name;
}

/* ---- types and values ---- */

/* The protobuf dtype code for a MilType; dies on a value outside the enum. */
static CoreML__Specification__MILSpec__DataType data_type(MilType t) {
  switch (t) {
  case MIL_BOOL: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BOOL;
  case MIL_F16: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16;
  case MIL_F32: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32;
  case MIL_I32: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32;
  case MIL_STR: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__STRING;
  case MIL_I8: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8;
  case MIL_U8: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8;
  case MIL_I4: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4;
  case MIL_U4: return CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT4;
  }
  die("bad MilType %d", (int)t);
}

/* A tensor ValueType of static shape s (rank 0: a scalar, no dimensions). */
static MilValueType *tensor_type(MilType t, const Shape *s) {
  MilTensorType *tt = kiln_alloc(sizeof *tt);
  *tt = (MilTensorType)CORE_ML__SPECIFICATION__MILSPEC__TENSOR_TYPE__INIT;
  tt->datatype = data_type(t);
  tt->rank = s->rank;
  tt->n_dimensions = (size_t)s->rank;
  tt->dimensions = kiln_alloc(sizeof *tt->dimensions * (size_t)(s->rank + 1));
  for (int i = 0; i < s->rank; i++) {
    MilDim *d = kiln_alloc(sizeof *d);
    *d = (MilDim)CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__INIT;
    d->dimension_case = CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT;
    d->constant = kiln_alloc(sizeof *d->constant);
    *d->constant = (CoreML__Specification__MILSpec__Dimension__ConstantDimension)
        CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__CONSTANT_DIMENSION__INIT;
    d->constant->size = (uint64_t)s->dim[i];
    tt->dimensions[i] = d;
  }
  MilValueType *vt = kiln_alloc(sizeof *vt);
  *vt = (MilValueType)CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__INIT;
  vt->type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE;
  vt->tensortype = tt;
  return vt;
}

/* A NamedValueType (function input or op output): a copy of name with tensor type (t, s). */
static MilNamed *named(const char *name, MilType t, const Shape *s) {
  MilNamed *nv = kiln_alloc(sizeof *nv);
  *nv = (MilNamed)CORE_ML__SPECIFICATION__MILSPEC__NAMED_VALUE_TYPE__INIT;
  nv->name = kiln_strdup(name);
  nv->type = tensor_type(t, s);
  return nv;
}

/* A Value of type (t, s) holding the immediate tensor tv. */
static MilValue *immediate(MilType t, const Shape *s, MilTensorValue *tv) {
  CoreML__Specification__MILSpec__Value__ImmediateValue *iv = kiln_alloc(sizeof *iv);
  *iv = (CoreML__Specification__MILSpec__Value__ImmediateValue)CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__INIT;
  iv->value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR;
  iv->tensor = tv;
  MilValue *v = kiln_alloc(sizeof *v);
  *v = (MilValue)CORE_ML__SPECIFICATION__MILSPEC__VALUE__INIT;
  v->type = tensor_type(t, s);
  v->value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE;
  v->immediatevalue = iv;
  return v;
}

/* A zero-initialised TensorValue in the arena; the caller sets value_case and the payload. */
static MilTensorValue *tensor_value(void) {
  MilTensorValue *tv = kiln_alloc(sizeof *tv);
  *tv = (MilTensorValue)CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__INIT;
  return tv;
}

/* An immediate scalar string Value holding a copy of str (op names, const string vals). */
static MilValue *string_value(const char *str) {
  MilTensorValue *tv = tensor_value();
  tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS;
  tv->strings = kiln_alloc(sizeof *tv->strings);
  *tv->strings = (CoreML__Specification__MILSpec__TensorValue__RepeatedStrings)
      CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__REPEATED_STRINGS__INIT;
  tv->strings->n_values = 1;
  tv->strings->values = kiln_alloc(sizeof(char *));
  tv->strings->values[0] = kiln_strdup(str);
  Shape scalar = {0};
  return immediate(MIL_STR, &scalar, tv);
}

/* ---- weight.bin ---- */

/* Makes room for n more bytes in the weight buffer (arena memory, see struct Mil). */
static void wb_reserve(Mil *m, size_t n) {
  if (m->wb.len + n <= m->wb.cap) return;
  size_t cap = m->wb.cap ? m->wb.cap : 4096;
  while (m->wb.len + n > cap) cap *= 2;
  char *d = kiln_alloc(cap);
  if (m->wb.len) memcpy(d, m->wb.data, m->wb.len);
  m->wb.data = d;
  m->wb.cap = cap;
}

/* Little-endian stores, so weight.bin's bytes do not depend on the host's byte order. */
static void wb_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void wb_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Appends one blob (metadata + payload; padbits: unused bits in the last byte of a 4-bit
 * payload) and returns the metadata's offset; with sharing on, returns the offset of an
 * identical blob already written instead. */
static uint64_t wb_add(Mil *m, uint32_t dtype_code, const void *data, size_t n, unsigned padbits) {
  const char *key = NULL;
  if (m->share) {
    key = kiln_fmt("%u/%zu/%016llx", dtype_code, n, (unsigned long long)kiln_fnv1a64(data, n));
    int *at = strmap_get(&m->blobs, key);
    if (at && memcmp(m->wb.data + (*at - 1) + 64, data, n) == 0) return (uint64_t)(*at - 1);
  }
  if (m->wb.len == 0) {                 /* the storage header, count patched below */
    wb_reserve(m, 64);
    memset(m->wb.data, 0, 64);
    wb_put_u32((uint8_t *)m->wb.data + 4, 2);
    m->wb.len = 64;
  }
  size_t meta = (m->wb.len + 63) / 64 * 64;
  wb_reserve(m, meta - m->wb.len + 64 + n);
  memset(m->wb.data + m->wb.len, 0, meta + 64 - m->wb.len);
  uint8_t *md = (uint8_t *)m->wb.data + meta;
  wb_put_u32(md, 0xDEADBEEFu);
  wb_put_u32(md + 4, dtype_code);
  wb_put_u64(md + 8, n);
  wb_put_u64(md + 16, meta + 64);
  wb_put_u64(md + 24, padbits);
  memcpy(m->wb.data + meta + 64, data, n);
  m->wb.len = meta + 64 + n;
  wb_put_u32((uint8_t *)m->wb.data, (uint32_t)++m->nblobs);
  if (key && meta < (size_t)INT32_MAX && !strmap_get(&m->blobs, key)) *strmap_put(&m->blobs, key) = (int)meta + 1;
  return meta;
}

/* A BlobFileValue of type (t, s) naming the blob whose metadata is at off. */
static MilValue *blob_ref(MilType t, const Shape *s, uint64_t off) {
  CoreML__Specification__MILSpec__Value__BlobFileValue *bf = kiln_alloc(sizeof *bf);
  *bf = (CoreML__Specification__MILSpec__Value__BlobFileValue)CORE_ML__SPECIFICATION__MILSPEC__VALUE__BLOB_FILE_VALUE__INIT;
  bf->filename = kiln_strdup(blob_file);
  bf->offset = off;
  MilValue *val = kiln_alloc(sizeof *val);
  *val = (MilValue)CORE_ML__SPECIFICATION__MILSPEC__VALUE__INIT;
  val->type = tensor_type(t, s);
  val->value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE;
  val->blobfilevalue = bf;
  return val;
}

/* Appends the n = numel(s) floats of v to weight.bin, as f16 (rounded) when t is MIL_F16 and
 * as f32 otherwise, and returns a BlobFileValue of type (t, s) pointing at that blob's metadata. */
static MilValue *blob_value(Mil *m, MilType t, const Shape *s, const float *v) {
  int64_t n = shape_numel(s);
  uint64_t off;
  if (t == MIL_F16) {
    uint16_t *h = kiln_alloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) h[i] = mil_f32_to_f16(v[i]);
    uint8_t *le = kiln_alloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) le[2 * i] = (uint8_t)h[i], le[2 * i + 1] = (uint8_t)(h[i] >> 8);
    off = wb_add(m, BLOB_F16, le, (size_t)n * 2, 0);
  } else {
    uint8_t *le = kiln_alloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, &v[i], 4);
      wb_put_u32(le + 4 * i, u);
    }
    off = wb_add(m, BLOB_F32, le, (size_t)n * 4, 0);
  }
  return blob_ref(t, s, off);
}

/* Appends numel(s) elements of integer type t, already packed as MILBlob stores them
 * (mil.h), to weight.bin and returns a BlobFileValue of type (t, s) for them. */
static MilValue *packed_value(Mil *m, MilType t, const Shape *s, const uint8_t *payload) {
  int64_t n = shape_numel(s);
  bool nib = t == MIL_I4 || t == MIL_U4;
  uint32_t code = t == MIL_I8 ? BLOB_I8 : t == MIL_U8 ? BLOB_U8 : t == MIL_I4 ? BLOB_I4 : t == MIL_U4 ? BLOB_U4 : 0;
  if (!code) die("packed_value: not an integer data type");
  size_t bytes = nib ? (size_t)(n + 1) / 2 : (size_t)n;
  return blob_ref(t, s, wb_add(m, code, payload, bytes, nib && n % 2 ? 4 : 0));
}

/* IEEE binary32 -> binary16, round to nearest even, including subnormals; overflow gives
 * +-inf, NaN stays a (quiet) NaN with its sign. */
uint16_t mil_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {                              /* subnormal half, or zero */
    if (e < -10) return (uint16_t)sign;
    uint32_t mm = man | 0x800000u;
    int shift = 14 - e;
    uint32_t h = mm >> shift, rem = mm & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;   /* a carry into inf is right */
  return (uint16_t)h;
}

/* ---- ops ---- */

/* Appends attribute key = v to op (attributes are kept in insertion order, so "name" stays first). */
static void add_attr(MilOp *op, const char *key, MilValue *v) {
  CoreML__Specification__MILSpec__Operation__AttributesEntry **a =
      kiln_alloc(sizeof *a * (op->n_attributes + 1));
  if (op->n_attributes) memcpy(a, op->attributes, sizeof *a * op->n_attributes);
  a[op->n_attributes] = kiln_alloc(sizeof **a);
  *a[op->n_attributes] = (CoreML__Specification__MILSpec__Operation__AttributesEntry)
      CORE_ML__SPECIFICATION__MILSPEC__OPERATION__ATTRIBUTES_ENTRY__INIT;
  a[op->n_attributes]->key = kiln_strdup(key);
  a[op->n_attributes]->value = v;
  op->attributes = a;
  op->n_attributes++;
}

/* A new op of the given MIL type named name (used as-is), appended to the program's block. */
static MilOp *append_op(Mil *m, const char *type, const char *name) {
  MilOp *op = kiln_alloc(sizeof *op);
  *op = (MilOp)CORE_ML__SPECIFICATION__MILSPEC__OPERATION__INIT;
  op->type = kiln_strdup(type);
  add_attr(op, "name", string_value(name));
  MilFn *f = m->f;
  f->ops = grow(f->ops, f->nops, &f->capops, sizeof *f->ops);
  f->ops[f->nops++] = op;
  return op;
}

/* A new op appended to the block: named base exactly when exact (the caller has claimed it),
 * else a fresh name derived from base. */
MilOp *mil_op(Mil *m, const char *type, const char *base, bool exact) {
  return append_op(m, type, exact ? base : mil_fresh(m, base));
}

/* Binds op parameter param to the n named values (a variadic list when n > 1, as concat's
 * "values"); dies on a NULL value, which means a lowering forgot an operand. */
void mil_args(Mil *m, MilOp *op, const char *param, const char *const *values, int n) {
  (void)m;
  MilArgument *arg = kiln_alloc(sizeof *arg);
  *arg = (MilArgument)CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__INIT;
  arg->n_arguments = (size_t)n;
  arg->arguments = kiln_alloc(sizeof *arg->arguments * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    if (!values[i]) die("op %s: parameter %s bound to no value", op->type, param);
    MilBinding *b = kiln_alloc(sizeof *b);
    *b = (MilBinding)CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__INIT;
    b->binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME;
    b->name = kiln_strdup(values[i]);
    arg->arguments[i] = b;
  }
  CoreML__Specification__MILSpec__Operation__InputsEntry **in = kiln_alloc(sizeof *in * (op->n_inputs + 1));
  if (op->n_inputs) memcpy(in, op->inputs, sizeof *in * op->n_inputs);
  in[op->n_inputs] = kiln_alloc(sizeof **in);
  *in[op->n_inputs] = (CoreML__Specification__MILSpec__Operation__InputsEntry)
      CORE_ML__SPECIFICATION__MILSPEC__OPERATION__INPUTS_ENTRY__INIT;
  in[op->n_inputs]->key = kiln_strdup(param);
  in[op->n_inputs]->value = arg;
  op->inputs = in;
  op->n_inputs++;
}

/* Binds param to the single named value (mil_args with n = 1). */
void mil_arg(Mil *m, MilOp *op, const char *param, const char *value) { mil_args(m, op, param, &value, 1); }

/* The op's name, from its `name` attribute (always the first). */
static const char *op_name(const MilOp *op) {
  return op->attributes[0]->value->immediatevalue->tensor->strings->values[0];
}

/* Declares op's single output of type (t, s), named after the op; returns that name.
 * Dies if the op already has an output. */
const char *mil_result(Mil *m, MilOp *op, MilType t, const Shape *s) {
  (void)m;
  if (op->n_outputs) die("op %s already has an output", op_name(op));
  op->outputs = kiln_alloc(sizeof *op->outputs);
  op->outputs[0] = named(op_name(op), t, s);
  op->n_outputs = 1;
  return op->outputs[0]->name;
}

/* ---- constants ---- */

/* A const op holding val; returns its output name. */
static const char *const_op(Mil *m, const char *base, MilType t, const Shape *s, MilValue *val) {
  MilOp *op = mil_op(m, "const", base, false);
  add_attr(op, "val", val);
  return mil_result(m, op, t, s);
}

/* A const op of float type t (F16 or F32) and shape s holding v's numel(s) values: inline for
 * small tensors, in weight.bin from MIL_BLOB_MIN_ELEMS up. Returns the value name; dies on other t. */
const char *mil_const_float(Mil *m, const char *base, MilType t, const Shape *s, const float *v) {
  if (t != MIL_F16 && t != MIL_F32) die("mil_const_float: not a float type");
  int64_t n = shape_numel(s);
  if (n >= MIL_BLOB_MIN_ELEMS) return const_op(m, base, t, s, blob_value(m, t, s, v));
  MilTensorValue *tv = tensor_value();
  if (t == MIL_F32) {
    tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS;
    tv->floats = kiln_alloc(sizeof *tv->floats);
    *tv->floats = (CoreML__Specification__MILSpec__TensorValue__RepeatedFloats)
        CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__REPEATED_FLOATS__INIT;
    tv->floats->n_values = (size_t)n;
    tv->floats->values = kiln_alloc(sizeof(float) * (size_t)(n + 1));
    if (n) memcpy(tv->floats->values, v, sizeof(float) * (size_t)n);
  } else {
    tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES;
    tv->bytes = kiln_alloc(sizeof *tv->bytes);
    *tv->bytes = (CoreML__Specification__MILSpec__TensorValue__RepeatedBytes)
        CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__REPEATED_BYTES__INIT;
    uint8_t *le = kiln_alloc((size_t)n * 2 + 1);
    for (int64_t i = 0; i < n; i++) {
      uint16_t h = mil_f32_to_f16(v[i]);
      le[2 * i] = (uint8_t)h;
      le[2 * i + 1] = (uint8_t)(h >> 8);
    }
    tv->bytes->values.len = (size_t)n * 2;
    tv->bytes->values.data = le;
  }
  return const_op(m, base, t, s, immediate(t, s, tv));
}

/* Contract in mil.h. */
const char *mil_const_packed(Mil *m, const char *base, MilType t, const Shape *s, const uint8_t *payload) {
  if (shape_numel(s) < MIL_BLOB_MIN_ELEMS) die("mil_const_packed: %lld elements stay inline", (long long)shape_numel(s));
  return const_op(m, base, t, s, packed_value(m, t, s, payload));
}

/* A const op of i32 values v with shape s; always inline. Returns the value name. */
const char *mil_const_int(Mil *m, const char *base, const Shape *s, const int32_t *v) {
  int64_t n = shape_numel(s);
  MilTensorValue *tv = tensor_value();
  tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS;
  tv->ints = kiln_alloc(sizeof *tv->ints);
  *tv->ints = (CoreML__Specification__MILSpec__TensorValue__RepeatedInts)
      CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__REPEATED_INTS__INIT;
  tv->ints->n_values = (size_t)n;
  tv->ints->values = kiln_alloc(sizeof(int32_t) * (size_t)(n + 1));
  if (n) memcpy(tv->ints->values, v, sizeof(int32_t) * (size_t)n);
  return const_op(m, base, MIL_I32, s, immediate(MIL_I32, s, tv));
}

/* A const op of bools with shape s, any nonzero byte of v being true; inline. Returns the name. */
const char *mil_const_bool(Mil *m, const char *base, const Shape *s, const uint8_t *v) {
  int64_t n = shape_numel(s);
  MilTensorValue *tv = tensor_value();
  tv->value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS;
  tv->bools = kiln_alloc(sizeof *tv->bools);
  *tv->bools = (CoreML__Specification__MILSpec__TensorValue__RepeatedBools)
      CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__REPEATED_BOOLS__INIT;
  tv->bools->n_values = (size_t)n;
  tv->bools->values = kiln_alloc(sizeof(protobuf_c_boolean) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) tv->bools->values[i] = v[i] != 0;
  return const_op(m, base, MIL_BOOL, s, immediate(MIL_BOOL, s, tv));
}

/* A scalar string const op (e.g. a pad mode); returns the value name. */
const char *mil_const_str(Mil *m, const char *base, const char *v) {
  Shape scalar = {0};
  return const_op(m, base, MIL_STR, &scalar, string_value(v));
}

/* Rank-0 const helpers: one value, named after base; return the value name. */
const char *mil_scalar_float(Mil *m, const char *base, MilType t, float v) {
  Shape scalar = {0};
  return mil_const_float(m, base, t, &scalar, &v);
}

const char *mil_scalar_int(Mil *m, const char *base, int32_t v) {
  Shape scalar = {0};
  return mil_const_int(m, base, &scalar, &v);
}

const char *mil_scalar_bool(Mil *m, const char *base, bool v) {
  Shape scalar = {0};
  uint8_t b = v;
  return mil_const_bool(m, base, &scalar, &b);
}

/* Rank-1 const helpers for attribute lists (axes, strides, perms): n values of shape [n]. */
const char *mil_ints(Mil *m, const char *base, const int32_t *v, int n) {
  Shape s = {.rank = 1, .dim = {n}};
  return mil_const_int(m, base, &s, v);
}

const char *mil_bools(Mil *m, const char *base, const uint8_t *v, int n) {
  Shape s = {.rank = 1, .dim = {n}};
  return mil_const_bool(m, base, &s, v);
}

/* ---- signature and results ---- */

/* Declares a function input of type (t, s); name must be claimed already (it is used as-is). */
static void add_input(MilFn *f, MilNamed *nv) {
  f->inputs = grow(f->inputs, f->ninputs, &f->capinputs, sizeof *f->inputs);
  f->inputs[f->ninputs++] = nv;
}

void mil_input(Mil *m, const char *name, MilType t, const Shape *s) { add_input(m->f, named(name, t, s)); }

/* Declares a state input: MIL type state<tensor<fp16, s>> (Core ML states hold fp16 only). */
void mil_state_input(Mil *m, const char *name, const Shape *s) {
  MilNamed *nv = named(name, MIL_F16, s);
  CoreML__Specification__MILSpec__StateType *st = kiln_alloc(sizeof *st);
  *st = (CoreML__Specification__MILSpec__StateType)CORE_ML__SPECIFICATION__MILSPEC__STATE_TYPE__INIT;
  st->wrappedtype = nv->type;
  MilValueType *vt = kiln_alloc(sizeof *vt);
  *vt = (MilValueType)CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__INIT;
  vt->type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE;
  vt->statetype = st;
  nv->type = vt;
  add_input(m->f, nv);
}

/* Appends name to the block's outputs, in call order (the model's output order). */
void mil_output(Mil *m, const char *name) {
  MilFn *f = m->f;
  f->outputs = grow(f->outputs, f->noutputs, &f->capoutputs, sizeof *f->outputs);
  f->outputs[f->noutputs++] = kiln_strdup(name);
}

/* Function f as a Program.functions map entry: one block for the opset. */
static CoreML__Specification__MILSpec__Program__FunctionsEntry *function_entry(const Mil *m, const MilFn *f) {
  CoreML__Specification__MILSpec__Block *blk = kiln_alloc(sizeof *blk);
  *blk = (CoreML__Specification__MILSpec__Block)CORE_ML__SPECIFICATION__MILSPEC__BLOCK__INIT;
  blk->n_outputs = (size_t)f->noutputs;
  blk->outputs = f->outputs;
  blk->n_operations = (size_t)f->nops;
  blk->operations = f->ops;

  CoreML__Specification__MILSpec__Function__BlockSpecializationsEntry *be = kiln_alloc(sizeof *be);
  *be = (CoreML__Specification__MILSpec__Function__BlockSpecializationsEntry)
      CORE_ML__SPECIFICATION__MILSPEC__FUNCTION__BLOCK_SPECIALIZATIONS_ENTRY__INIT;
  be->key = kiln_strdup(m->opset);
  be->value = blk;

  CoreML__Specification__MILSpec__Function *fn = kiln_alloc(sizeof *fn);
  *fn = (CoreML__Specification__MILSpec__Function)CORE_ML__SPECIFICATION__MILSPEC__FUNCTION__INIT;
  fn->n_inputs = (size_t)f->ninputs;
  fn->inputs = f->inputs;
  fn->opset = kiln_strdup(m->opset);
  fn->n_block_specializations = 1;
  fn->block_specializations = kiln_alloc(sizeof *fn->block_specializations);
  fn->block_specializations[0] = be;

  CoreML__Specification__MILSpec__Program__FunctionsEntry *fe = kiln_alloc(sizeof *fe);
  *fe = (CoreML__Specification__MILSpec__Program__FunctionsEntry)
      CORE_ML__SPECIFICATION__MILSPEC__PROGRAM__FUNCTIONS_ENTRY__INIT;
  fe->key = kiln_strdup(f->name);
  fe->value = fn;
  return fe;
}

/* Wraps every function built so far, in creation order, into a Program. Shares, not
 * copies, the Mil's arrays: build no more after this. */
MilProgram *mil_program(Mil *m) {
  MilProgram *p = kiln_alloc(sizeof *p);
  *p = (MilProgram)CORE_ML__SPECIFICATION__MILSPEC__PROGRAM__INIT;
  p->version = 1;
  p->n_functions = (size_t)m->nfns;
  p->functions = kiln_alloc(sizeof *p->functions * (size_t)(m->nfns + 1));
  for (int i = 0; i < m->nfns; i++) p->functions[i] = function_entry(m, m->fns[i]);
  return p;
}

/* Read-only views for the emitter: weight.bin's bytes so far and the blob and op counts. */
const Buf *mil_weights(Mil *m) { return &m->wb; }
int mil_nblobs(Mil *m) { return m->nblobs; }
int mil_nops(Mil *m) { return m->f ? m->f->nops : 0; }
