/*
 * emit_common.c — what the C and Metal emitters share: rendering the op table's
 * scalar expressions for a target, broadcast strides and loop coalescing for
 * elementwise kernels, and turning model names into identifiers.
 *
 * Expressions in ops.h are written once in a neutral C-like dialect over the
 * operands x, y, z and the functions exp log sqrt tanh erf fabs fmax fmin pow.
 * A target differs only in a table that spells those functions (tinygrad's idea
 * of one rewrite table per language, kept as data here): C maps exp to expf, MSL
 * to metal::exp. The renderer is a tiny tokenizer, not a parser: identifiers are
 * operands or function names, everything else (numbers, operators, parentheses)
 * is copied as is, so what a reviewer reads in ops.h is what lands in the kernel.
 */
#include "kiln.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

const EmitFn emit_c_fns[] = {
    {"exp", "expf"},   {"log", "logf"},   {"sqrt", "sqrtf"}, {"tanh", "tanhf"}, {"erf", "erff"},
    {"fabs", "fabsf"}, {"fmax", "fmaxf"}, {"fmin", "fminf"}, {"pow", "powf"},   {NULL, NULL},
};

static bool ident_char(char c, bool first) {
  return c == '_' || isalpha((unsigned char)c) || (!first && isdigit((unsigned char)c));
}

/* True when s needs no parentheses to be used as an operand: an identifier,
 * optionally followed by [index] subscripts. */
static bool is_simple_operand(const char *s) {
  if (!ident_char(*s, true)) return false;
  int depth = 0;
  for (; *s; s++) {
    if (*s == '[') depth++;
    else if (*s == ']') depth--;
    else if (depth == 0 && !ident_char(*s, false)) return false;
  }
  return depth == 0;
}

static const char *lookup_fn(const EmitFn *fns, const char *name, size_t n) {
  for (int i = 0; fns[i].neutral; i++)
    if (strlen(fns[i].neutral) == n && memcmp(fns[i].neutral, name, n) == 0) return fns[i].target;
  return NULL;
}

/* Length of a numeric literal at p: digits and '.', an exponent, a float suffix. */
static size_t number_len(const char *p) {
  const char *q = p;
  while (isdigit((unsigned char)*q) || *q == '.') q++;
  if ((*q == 'e' || *q == 'E') && (isdigit((unsigned char)q[1]) || ((q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])))) {
    q += 2;
    while (isdigit((unsigned char)*q)) q++;
  }
  if (*q == 'f' || *q == 'F') q++;
  return (size_t)(q - p);
}

char *emit_expr(const char *expr, const EmitFn *fns, const char *const *operands, int noperands) {
  Buf b = {0};
  for (const char *p = expr; *p;) {
    if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
      size_t n = number_len(p);
      buf_put(&b, p, n);
      p += n;
    } else if (ident_char(*p, true)) {
      const char *q = p;
      while (ident_char(*q, false)) q++;
      size_t n = (size_t)(q - p);
      int k = n == 1 && *p >= 'x' && *p <= 'z' ? *p - 'x' : -1;
      if (k >= 0) {
        if (k >= noperands) die("expression \"%s\" uses operand %c, only %d given", expr, *p, noperands);
        const char *op = operands[k];
        if (is_simple_operand(op)) buf_puts(&b, op);
        else buf_printf(&b, "(%s)", op);
      } else {
        const char *t = lookup_fn(fns, p, n);
        if (!t) die("expression \"%s\": function %.*s has no spelling for this target", expr, (int)n, p);
        buf_puts(&b, t);
      }
      p = q;
    } else {
      buf_put(&b, p, 1);
      p++;
    }
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

void emit_strides(const Shape *s, int64_t strides[KILN_MAX_RANK]) {
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= s->dim[i];
  }
}

void emit_bcast_strides(const Shape *in, const Shape *out, int64_t strides[KILN_MAX_RANK]) {
  int64_t own[KILN_MAX_RANK];
  emit_strides(in, own);
  if (in->rank > out->rank) die("broadcast: rank %d input against rank %d output", in->rank, out->rank);
  int lead = out->rank - in->rank;
  for (int i = 0; i < out->rank; i++) {
    if (i < lead) {
      strides[i] = 0;
      continue;
    }
    int64_t d = in->dim[i - lead];
    if (d == out->dim[i]) strides[i] = d == 1 ? 0 : own[i - lead];
    else if (d == 1) strides[i] = 0;
    else die("broadcast: %s does not broadcast to %s", shape_str(in), shape_str(out));
  }
}

/* Dim j (the outer) merges into dim j+1 when, for every operand, walking j is the
 * same as continuing the walk of j+1: stride[j] == stride[j+1] * dim[j+1]. A size-1
 * dim always merges (its stride never matters). */
static bool can_merge(int nops, int64_t strides[][KILN_MAX_RANK], const int64_t *dims, int j) {
  if (dims[j] == 1 || dims[j + 1] == 1) return true;
  for (int k = 0; k < nops; k++)
    if (strides[k][j] != strides[k][j + 1] * dims[j + 1]) return false;
  return true;
}

void emit_coalesce(const Shape *out, int nops, int64_t strides[][KILN_MAX_RANK], int *rank,
                   int64_t dims[KILN_MAX_RANK]) {
  int r = out->rank;
  for (int i = 0; i < r; i++) dims[i] = out->dim[i];
  if (r == 0) {
    dims[0] = 1;
    for (int k = 0; k < nops; k++) strides[k][0] = 0;
    *rank = 1;
    return;
  }
  /* Walk from the innermost dim outwards, folding dim j into the kept dim after it. */
  for (int j = r - 2; j >= 0; j--) {
    if (!can_merge(nops, strides, dims, j)) continue;
    bool inner_one = dims[j + 1] == 1;
    for (int k = 0; k < nops; k++)
      if (inner_one) strides[k][j + 1] = strides[k][j];
    dims[j + 1] *= dims[j];
    for (int i = j; i < r - 1; i++) {
      dims[i] = dims[i + 1];
      for (int k = 0; k < nops; k++) strides[k][i] = strides[k][i + 1];
    }
    r--;
  }
  /* A merged dim of size 1 has no meaningful stride; 0 keeps the generated code tidy. */
  for (int i = 0; i < r; i++)
    if (dims[i] == 1)
      for (int k = 0; k < nops; k++) strides[k][i] = 0;
  *rank = r;
}

char *emit_ident(const char *name) {
  size_t n = strlen(name);
  char *s = kiln_alloc(n + 2), *o = s;
  if (n == 0 || isdigit((unsigned char)name[0])) *o++ = '_';
  for (size_t i = 0; i < n; i++) *o++ = ident_char(name[i], false) ? name[i] : '_';
  *o = 0;
  return s;
}

char *emit_upper(const char *s) {
  char *u = kiln_strdup(s);
  for (char *p = u; *p; p++) *p = (char)toupper((unsigned char)*p);
  return u;
}

bool emit_is_c_keyword(const char *s) {
  static const char *const kw[] = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
      "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
      "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
      "volatile", "while", "_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic",
      "_Imaginary", "_Noreturn", "_Static_assert", "_Thread_local", "NULL", "bool", "true", "false",
      "errno", "assert", "int32_t", "uint8_t", "int64_t", "size_t", "main", NULL};
  for (int i = 0; kw[i]; i++)
    if (strcmp(kw[i], s) == 0) return true;
  return false;
}

char *emit_int_list(const int64_t *v, int n) {
  Buf b = {0};
  buf_puts(&b, "{");
  for (int i = 0; i < n; i++) buf_printf(&b, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (n == 0) buf_puts(&b, "0");
  buf_puts(&b, "}");
  char *s = kiln_strdup(b.data);
  buf_free(&b);
  return s;
}

char *emit_float(float v) {
  if (isnan(v)) return kiln_strdup("NAN");
  if (isinf(v)) return kiln_strdup(v > 0 ? "INFINITY" : "-INFINITY");
  char tmp[48];
  snprintf(tmp, sizeof tmp, "%.9g", (double)v);
  bool has_point = strpbrk(tmp, ".e") != NULL;
  return kiln_fmt("%s%sf", tmp, has_point ? "" : ".0");
}

const char *emit_c_type(DType t) {
  switch (t) {
  case DT_F32: return "float";
  case DT_I32: return "int32_t";
  case DT_BOOL: return "uint8_t";
  }
  die("bad dtype %d", (int)t);
}
