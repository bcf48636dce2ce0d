/*
 * ops.c — the op table (ops.h) instantiated as data, and the small helpers on
 * dtypes and shapes that every phase shares.
 */
#include "kiln.h"

#include <string.h>

const OpInfo kiln_ops[OP__COUNT] = {
#define X(id, nm, mi, ma, fam, fl, ex, iex, dc) [OP_##id] = {nm, mi, ma, fam, fl, ex, iex, dc},
    KILN_OPS(X)
#undef X
};

/* Looks up an op by its table name ("add", "matmul"); on a match stores the kind in *out.
 * Returns false, leaving *out untouched, for a name not in kiln_ops. */
bool op_parse(const char *name, OpKind *out) {
  for (int i = 0; i < OP__COUNT; i++)
    if (strcmp(kiln_ops[i].name, name) == 0) {
      *out = (OpKind)i;
      return true;
    }
  return false;
}

/* Contract in kiln.h: i32 operands take the wrapping iexpr where the op has one; ops
 * that do not compute (copy, where) use expr for every dtype. */
const char *op_expr(OpKind op, DType t) {
  return t == DT_I32 && kiln_ops[op].iexpr ? kiln_ops[op].iexpr : kiln_ops[op].expr;
}

/* The dtype's short spelling ("f32", "i32", "bool"), a static string; dies on a value outside DType. */
const char *dtype_name(DType t) {
  switch (t) {
  case DT_F32: return "f32";
  case DT_I32: return "i32";
  case DT_BOOL: return "bool";
  case DT_I64: return "i64";
  }
  die("bad dtype %d", (int)t);
}

/* Bytes per element: bool is stored as one byte, f32 and i32 as four, i64 as eight. */
int dtype_size(DType t) { return t == DT_BOOL ? 1 : t == DT_I64 ? 8 : 4; }

/* Accepts "f32"/"float32", "i32"/"int32" and "bool" (exact, case-sensitive) into *out;
 * returns false on anything else, leaving *out untouched. */
bool dtype_parse(const char *s, DType *out) {
  static const struct { const char *name; DType t; } names[] = {
      {"f32", DT_F32}, {"float32", DT_F32}, {"i32", DT_I32}, {"int32", DT_I32}, {"bool", DT_BOOL},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i].name, s) == 0) {
      *out = names[i].t;
      return true;
    }
  return false;
}

/* Product of the dims (1 for rank 0). No overflow check: only for shapes shape_infer
 * already bounded; use shape_numel_checked on unchecked ones. */
int64_t shape_numel(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i];
  return n;
}

/* True when rank and every dim agree; dims beyond rank are not compared. */
bool shape_eq(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

/* Renders "[2, 3, 4]" ("[]" for a scalar) into a fresh arena string, for messages and dumps. */
char *shape_str(const Shape *s) {
  char buf[32 * KILN_MAX_RANK + 4];
  size_t n = 0;
  buf[n++] = '[';
  for (int i = 0; i < s->rank; i++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
  snprintf(buf + n, sizeof buf - n, "]");
  return kiln_strdup(buf);
}
