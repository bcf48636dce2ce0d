/*
 * coreml_weights.c — a weight kept in a stored format, as the Core ML package holds it.
 *
 * The build keeps a matrix weight W [n, k] in a stored format (pass_quant: Node.wfmt, its
 * panels from node_stored, its exact f32 values from node_data). MIL can hold some of those
 * formats compactly, and the rule here is that the program's weight has exactly the
 * values the C target computes with (rounded once to fp16 in an fp16 program, as every
 * f32 weight is), or the format is not used:
 *
 *   - f16 is an fp16 const. An fp32 program reads it through iOS18's
 *     constexpr_blockwise_shift_scale with fp16 data and one fp32 scale of 1.0 (an fp32
 *     value, so it feeds `linear` directly), and below iOS18 through a `cast` (the
 *     emitter then uses matmul, whose operand need not be a const);
 *   - from iOS18, the formats without an additive term (i8, q8_0, q4_0, q6_k: value =
 *     a * q per group) are constexpr_blockwise_shift_scale, output = scale * data, with
 *     int8 or int4 data and the group's a as the scale; the formats with one whose codes
 *     are 4 bit (q4_k, g4: value = a * q + c) are constexpr_lut_to_dense with a 16-entry
 *     table per group. MIL's shift-scale computes scale * (q - offset), which gives
 *     a * q + c only when c / a is an exact offset: in general it is not, and one table
 *     per group is exact. g8 would need 256 entries per 64 weights: larger than f32;
 *   - everything else (below iOS18, bf16, g8) is a plain const: fp16 when every value
 *     is an fp16 exactly, otherwise the program's float type; such weights are listed in
 *     the build's note.
 *
 * Every encoding is checked element by element against Node.data before it is used (a
 * mismatch falls back to a plain const), so the claim "exact" is verified per tensor.
 * The scales' type is the output type of the constexpr op: fp32 in fp32 programs (the
 * products a * q are exact in fp32), fp16 in fp16 programs when every scale is an fp16
 * (then a * q has at most 19 bits and is rounded once to fp16, as a plain fp16 const
 * would be), fp32 otherwise (i8's f32 scales, q6_k's d * sc): that fp32 value feeds an
 * iOS17+ `linear` weight (type domain U) and is cast to fp16 for other uses.
 */
#include "coreml_weights.h"

#include <stdlib.h>
#include <string.h>

typedef enum { WHY_OS, WHY_BF16, WHY_G8, WHY_INEXACT, WHY__COUNT } Why;

static const char *const why_text[WHY__COUNT] = {
    [WHY_OS] = "compressed weights need --min-os iOS18",
    [WHY_BF16] = "Core ML has no bf16 weights",
    [WHY_G8] = "MIL's scale * (q - offset) cannot give s * q + b exactly, and a table of 256 values per 64 "
               "weights is larger than f32",
    [WHY_INEXACT] = "its compressed form would not decode to the stored values exactly",
};

typedef struct {
  const char *name;
  WFormat f;
} Widened;

struct CwNotes {
  StrMap seen;                   /* weight names already recorded */
  Widened *list[WHY__COUNT];
  int n[WHY__COUNT], cap[WHY__COUNT];
};

/* Contract in coreml_weights.h. */
CwNotes *coreml_weight_notes(void) { return kiln_alloc(sizeof(CwNotes)); }

/* Records weight w as held uncompressed for reason why (once per name). */
static void note(CwNotes *nt, const Node *w, Why why) {
  if (!nt || strmap_get(&nt->seen, w->name)) return;
  strmap_put(&nt->seen, w->name);
  if (nt->n[why] == nt->cap[why]) {
    int cap = nt->cap[why] ? 2 * nt->cap[why] : 16;
    Widened *l = kiln_alloc(sizeof *l * (size_t)cap);
    if (nt->n[why]) memcpy(l, nt->list[why], sizeof *l * (size_t)nt->n[why]);
    nt->list[why] = l, nt->cap[why] = cap;
  }
  nt->list[why][nt->n[why]++] = (Widened){w->name, w->wfmt};
}

/* Whether f is an fp16 value exactly (NaN counts: it stays a NaN). */
static bool f16_exact(float f) { return f != f || kiln_f16_to_f32(mil_f32_to_f16(f)) == f; }

static bool all_f16_exact(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!f16_exact(v[i])) return false;
  return true;
}

/* Bitwise equality of two floats (so +0 and -0 differ, and a NaN equals itself). */
static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The codes q (n values) packed as MIL stores type t: a byte each, or two per byte with
 * element i in the low nibble when i is even (MILBlob's sub-byte order). */
static uint8_t *pack_codes(const int16_t *q, int64_t n, MilType t) {
  bool nib = t == MIL_I4 || t == MIL_U4;
  uint8_t *p = kiln_alloc((size_t)(nib ? (n + 1) / 2 : n) + 1);
  for (int64_t i = 0; i < n; i++) {
    if (nib) p[i / 2] |= (uint8_t)((q[i] & 15) << (4 * (i % 2)));
    else p[i] = (uint8_t)q[i];
  }
  return p;
}

/* A rank-2 shape. */
static Shape shape2(int64_t a, int64_t b) { return (Shape){.rank = 2, .dim = {a, b}}; }

/* w as a plain const of type t (fp16 rounds, nearest even). */
static const char *plain(Mil *m, const Node *w, MilType t) { return mil_const_float(m, w->name, t, &w->shape, node_data(w)); }

/* fp16 data (exact) read as fp32 through constexpr_blockwise_shift_scale with scale 1.0:
 * an fp32 value a `linear` weight can be, from half the bytes (iOS18). */
static const char *f16_as_f32(Mil *m, const Node *w) {
  const char *data = mil_const_float(m, kiln_fmt("%s_f16", w->name), MIL_F16, &w->shape, node_data(w));
  Shape one = shape2(1, 1);
  float unit = 1.0f;
  const char *scale = mil_const_float(m, kiln_fmt("%s_scale", w->name), MIL_F32, &one, &unit);
  MilOp *op = mil_op(m, "constexpr_blockwise_shift_scale", w->name, false);
  mil_arg(m, op, "data", data);
  mil_arg(m, op, "scale", scale);
  return mil_result(m, op, MIL_F32, &w->shape);
}

/* value = a[g] * q as constexpr_blockwise_shift_scale (int8 or int4 data, scale [n, k /
 * group], no offset), or NULL when some element would differ from node_data. *t: the
 * scale's (and output's) type. */
static const char *shift_scale(Mil *m, const Node *w, const QuantSplit *s, MilType ft, MilType *t) {
  int64_t n = w->shape.dim[0], k = w->shape.dim[1], groups = k / s->group;
  const float *x = node_data(w);
  for (int64_t i = 0; i < n * k; i++)
    if (!same_bits(s->a[i / k * groups + i % k / s->group] * (float)s->q[i], x[i])) return NULL;
  *t = ft == MIL_F16 && all_f16_exact(s->a, n * groups) ? MIL_F16 : MIL_F32;
  MilType qt = s->qmin >= -8 && s->qmax <= 7 ? MIL_I4 : MIL_I8;
  const char *data = mil_const_packed(m, kiln_fmt("%s_q", w->name), qt, &w->shape, pack_codes(s->q, n * k, qt));
  Shape ss = shape2(n, groups);
  const char *scale = mil_const_float(m, kiln_fmt("%s_scale", w->name), *t, &ss, s->a);
  MilOp *op = mil_op(m, "constexpr_blockwise_shift_scale", w->name, false);
  mil_arg(m, op, "data", data);
  mil_arg(m, op, "scale", scale);
  return mil_result(m, op, *t, &w->shape);
}

/* value = a[g] * q + c[g], q in 0..15, as constexpr_lut_to_dense: uint4 indices [n, k] and
 * a table [n, k / group, 16, 1] of type ft holding each group's 16 values, or NULL when
 * some element would differ from node_data. */
static const char *lut(Mil *m, const Node *w, const QuantSplit *s, MilType ft) {
  int64_t n = w->shape.dim[0], k = w->shape.dim[1], groups = k / s->group;
  float *table = kiln_alloc(sizeof(float) * (size_t)(n * groups * 16));
  for (int64_t g = 0; g < n * groups; g++)
    for (int v = 0; v < 16; v++) table[g * 16 + v] = s->a[g] * (float)v + s->c[g];
  const float *x = node_data(w);
  for (int64_t i = 0; i < n * k; i++)
    if (!same_bits(table[(i / k * groups + i % k / s->group) * 16 + s->q[i]], x[i])) return NULL;
  const char *idx = mil_const_packed(m, kiln_fmt("%s_q", w->name), MIL_U4, &w->shape, pack_codes(s->q, n * k, MIL_U4));
  Shape ls = {.rank = 4, .dim = {n, groups, 16, 1}};
  const char *tab = mil_const_float(m, kiln_fmt("%s_lut", w->name), ft, &ls, table);
  MilOp *op = mil_op(m, "constexpr_lut_to_dense", w->name, false);
  mil_arg(m, op, "indices", idx);
  mil_arg(m, op, "lut", tab);
  return mil_result(m, op, ft, &w->shape);
}

/* A plain const for a format MIL cannot (or, at this OS, may not) hold compactly: fp16
 * when every value is one, else ft; recorded in notes when that is larger than the
 * format (an fp16 program's fp16 is its own rounding of bf16, not a widening). */
static const char *fallback(Mil *m, const Node *w, MilType ft, int spec, MilType *t, CwNotes *nt, Why why) {
  int64_t count = shape_numel(&w->shape);
  *t = ft == MIL_F16 || all_f16_exact(node_data(w), count) ? MIL_F16 : MIL_F32;
  if (*t == MIL_F32 || w->wfmt != WF_BF16) note(nt, w, why);
  if (*t == MIL_F16 && ft == MIL_F32 && spec >= 9) {
    *t = MIL_F32;
    return f16_as_f32(m, w);
  }
  return plain(m, w, *t);
}

/* Contract in coreml_weights.h. */
const char *coreml_weight(Mil *m, const Node *w, MilType ft, int spec, MilType *t, CwNotes *nt) {
  if (w->wfmt == WF_F16) {
    *t = MIL_F16;
    if (ft == MIL_F32 && spec >= 9) return *t = MIL_F32, f16_as_f32(m, w);
    return plain(m, w, MIL_F16);
  }
  if (w->wfmt == WF_BF16) return fallback(m, w, ft, spec, t, nt, WHY_BF16);
  if (spec < 9) return fallback(m, w, ft, spec, t, nt, WHY_OS);
  QuantSplit s;
  bool owned;
  const unsigned char *panels = node_stored(w, &owned);
  bool split = quant_split(w->wfmt, panels, w->shape.dim[0], w->shape.dim[1], &s);   /* copies the codes */
  if (owned) free((void *)panels);
  if (!split) die("coreml_weight: %s has no codes", w->name);
  const char *v = NULL;
  if (!s.c) v = shift_scale(m, w, &s, ft, t);
  else if (s.qmin >= 0 && s.qmax <= 15 && (v = lut(m, w, &s, ft))) *t = ft;
  else if (s.qmax > 15) return fallback(m, w, ft, spec, t, nt, WHY_G8);
  return v ? v : fallback(m, w, ft, spec, t, nt, WHY_INEXACT);
}

/* Contract in coreml_weights.h. At most 16 names per reason, then a count. */
void coreml_weight_report(const CwNotes *nt, const char *min_os, MilType ft) {
  int total = 0;
  for (int r = 0; r < WHY__COUNT; r++) total += nt->n[r];
  if (!total) return;
  Buf b = {0};
  buf_printf(&b, "kiln: note: Core ML package (--min-os %s, %s): %d weight%s held uncompressed, as %s: ", esc_message(min_os),
             ft == MIL_F16 ? "fp16" : "fp32", total, total == 1 ? "" : "s",
             ft == MIL_F16 ? "fp16" : "fp32 (fp16 where every value is one)");
  const char *sep = "";
  for (int r = 0; r < WHY__COUNT; r++) {
    if (!nt->n[r]) continue;
    buf_printf(&b, "%s", sep);
    for (int i = 0; i < nt->n[r] && i < 16; i++) buf_printf(&b, "%s%s", i ? ", " : "", esc_message(nt->list[r][i].name));
    if (nt->n[r] > 16) buf_printf(&b, " and %d more", nt->n[r] - 16);
    bool seen[WF__COUNT] = {0};
    buf_printf(&b, " (");
    for (int i = 0, k = 0; i < nt->n[r]; i++)
      if (!seen[nt->list[r][i].f]) {
        seen[nt->list[r][i].f] = true;
        buf_printf(&b, "%s%s", k++ ? ", " : "", wformat_info(nt->list[r][i].f)->name);
      }
    buf_printf(&b, "): %s", why_text[r]);
    sep = "; ";
  }
  fprintf(stderr, "%s\n", b.data);
  buf_free(&b);
}
