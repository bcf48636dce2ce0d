/*
 * emit_common.c — what the C and Metal emitters share: rendering the op table's
 * scalar expressions for a target, each family's geometry (what its kernel walks:
 * broadcast strides and coalesced loops, a matmul's batch, conv and pool sizes, a
 * reduction's kept and reduced dims, the outer x N x inner view around an axis,
 * concat and gather blocks), turning model names into identifiers, template
 * variables, and the epilogue of fused kernels.
 *
 * The geometry is plain numbers in a small struct per family (MatmulGeom,
 * ReduceGeom...); a target maps it to its template variables and decides only how
 * its threads or loops cover it, so the two targets cannot drift apart on what a
 * kernel computes. Where both targets' templates name a variable the same way
 * (conv, pool, matmul sizes), the mapping lives here too.
 *
 * Expressions in ops.h are written once in a neutral C-like dialect over the
 * operands x, y, z and the functions exp log sqrt tanh erf fabs fmax fmin pow sin cos
 * floor ceil rint.
 * A target differs only in a table that spells those functions (tinygrad's idea
 * of one rewrite table per language, kept as data here): C maps exp to expf, MSL
 * to metal::exp. The renderer is a tiny tokenizer, not a parser: identifiers are
 * operands or function names, everything else (numbers, operators, parentheses)
 * is copied as is, so what a reviewer reads in ops.h is what lands in the kernel.
 *
 * Fused kernels (pass_group) are an anchor node rendered by its family's template
 * plus a chain of elementwise nodes. Every template marks the points where it
 * stores an output element as $EPILOGUE(value, flat index), so no template knows
 * about chains: emit_epilogue_apply turns a hook into the bare value for a lone
 * node, or into a call of a small helper that runs the chain (one `const T vK =
 * expr;` per node, the same expressions as the node's own kernel), reading each
 * extra operand at the element's index. Both targets build the helper here; they
 * differ only in an EmitTarget table (type names, casts, pointer qualifiers,
 * literal suffixes, templates).
 */
#include "kiln.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* exp, log, tanh and erf are Kiln's own (templates/c/math_*.c.tmpl, added to the file by
 * emit_c.c when a kernel calls them): they vectorise and give the same bits on every ISA,
 * where libm's would do neither. */
const EmitFn emit_c_fns[] = {
    {"exp", "kiln_expf"}, {"log", "kiln_logf"}, {"sqrt", "sqrtf"}, {"tanh", "kiln_tanhf"}, {"erf", "kiln_erff"},
    {"fabs", "fabsf"}, {"fmax", "fmaxf"}, {"fmin", "fminf"}, {"pow", "powf"}, {"sin", "sinf"},
    {"cos", "cosf"},   {"floor", "floorf"}, {"ceil", "ceilf"}, {"rint", "rintf"}, {"fmod", "fmodf"},
    {"round_f16", "kiln_round_f16"},
    {"i64", "(int64_t)"}, {"i32", "(int32_t)"},   /* i32 arithmetic: widen, then wrap back */
    {NULL, NULL},
};

/* True if c may appear in a C identifier: '_' or a letter, or a digit when not first. */
static bool ident_char(char c, bool first) {
  return c == '_' || isalpha((unsigned char)c) || (!first && isdigit((unsigned char)c));
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

/* True when s needs no parentheses to be used as an operand: an identifier,
 * optionally followed by [index] subscripts, or an unsigned number. */
static bool is_simple_operand(const char *s) {
  if (isdigit((unsigned char)*s)) return number_len(s) == strlen(s);
  if (!ident_char(*s, true)) return false;
  int depth = 0;
  for (; *s; s++) {
    if (*s == '[') depth++;
    else if (*s == ']') depth--;
    else if (depth == 0 && !ident_char(*s, false)) return false;
  }
  return depth == 0;
}

/* The target spelling of the n-byte neutral function name in the {NULL}-ended
 * table fns, or NULL if the target has none. */
static const char *lookup_fn(const EmitFn *fns, const char *name, size_t n) {
  for (int i = 0; fns[i].neutral; i++)
    if (strlen(fns[i].neutral) == n && memcmp(fns[i].neutral, name, n) == 0) return fns[i].target;
  return NULL;
}

/* Renders an ops.h expression: x/y/z become operands[0..2] (parenthesised unless
 * simple), functions map through fns. Dies on a missing operand or spelling; arena string. */
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

/* Row-major element strides of s (last dim 1) into strides[0..rank-1]. */
void emit_strides(const Shape *s, int64_t strides[KILN_MAX_RANK]) {
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= s->dim[i];
  }
}

/* in's strides over out's dims, 0 where broadcast (see kiln.h); dies if in does not
 * broadcast to out. */
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

/* Merges adjacent dims all nops operands walk alike, in place (see kiln.h); a
 * rank-0 out becomes rank 1 of size 1 with zero strides. */
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

/* ---- per-family geometry ---- */

/* The coalesced walk of n's output (operand 0) and its broadcast inputs; dies if n
 * has more inputs than EMIT_MAX_WALK - 1. */
EmitWalk emit_elementwise_walk(Graph *g, const Node *n) {
  EmitWalk w = {.nops = n->nin + 1};
  if (w.nops > EMIT_MAX_WALK) die("elementwise %s with %d inputs", kiln_ops[n->op].name, n->nin);
  emit_strides(&n->shape, w.strides[0]);
  for (int i = 0; i < n->nin; i++) emit_bcast_strides(&graph_node(g, n->in[i])->shape, &n->shape, w.strides[i + 1]);
  emit_coalesce(&n->shape, w.nops, w.strides, &w.rank, w.dims);
  return w;
}

/* x's element strides per output dim and the offset of the first element read:
 * transpose permutes x's strides, slice multiplies them by the steps. */
static int64_t copy_strides(Graph *g, const Node *n, int64_t st[KILN_MAX_RANK]) {
  int64_t xs[KILN_MAX_RANK], base = 0;
  emit_strides(&graph_node(g, n->in[0])->shape, xs);
  for (int i = 0; i < n->shape.rank; i++) {
    if (n->op == OP_TRANSPOSE) st[i] = xs[n->a.perm[i]];
    else if (n->op == OP_SLICE) {
      st[i] = xs[i] * n->a.step[i];
      base += n->a.start[i] * xs[i];
    } else die("copy walk of %s", kiln_ops[n->op].name);
  }
  return base;
}

/* The coalesced walk of a TRANSPOSE or SLICE: output and x strides, base = x's first
 * element read; dies on any other op. */
EmitWalk emit_copy_walk(Graph *g, const Node *n) {
  EmitWalk w = {.nops = 2};
  emit_strides(&n->shape, w.strides[0]);
  w.base = copy_strides(g, n, w.strides[1]);
  emit_coalesce(&n->shape, 2, w.strides, &w.rank, w.dims);
  return w;
}

/* s without its last two dims: the batch dims of a matmul operand. */
static Shape batch_of(const Shape *s) {
  Shape b = *s;
  b.rank -= 2;
  return b;
}

/* M, N, K and element strides of x and y per trans flags, plus the batch walk with
 * broadcast batch strides in elements; n is a shape-checked MATMUL of rank >= 2. */
MatmulGeom emit_matmul_geom(Graph *g, const Node *n) {
  const Node *x = graph_node(g, n->in[0]), *y = graph_node(g, n->in[1]);
  const Attrs *a = &n->a;
  MatmulGeom m = {.m = n->shape.dim[n->shape.rank - 2], .n = n->shape.dim[n->shape.rank - 1]};
  m.k = a->trans_x ? x->shape.dim[x->shape.rank - 2] : x->shape.dim[x->shape.rank - 1];
  m.trans_x = a->trans_x;
  m.trans_y = a->trans_y;
  m.xs_m = a->trans_x ? 1 : m.k;
  m.xs_k = a->trans_x ? m.m : 1;
  m.ys_k = a->trans_y ? 1 : m.n;
  m.ys_n = a->trans_y ? m.k : 1;
  Shape bo = batch_of(&n->shape), bx = batch_of(&x->shape), by = batch_of(&y->shape);
  EmitWalk *w = &m.b;
  w->nops = 3;
  emit_strides(&bo, w->strides[0]);
  emit_bcast_strides(&bx, &bo, w->strides[1]);
  emit_bcast_strides(&by, &bo, w->strides[2]);
  for (int i = 0; i < bo.rank; i++) {   /* in elements: matrix strides times the matrix sizes */
    w->strides[1][i] *= m.m * m.k;
    w->strides[2][i] *= m.k * m.n;
  }
  emit_coalesce(&bo, 3, w->strides, &w->rank, w->dims);
  m.batch = shape_numel(&bo);
  return m;
}

/* Sets M N K XS_M XS_K YS_K YS_N in v; emit_vari dies on values over 32 bits. */
void emit_matmul_vars(EmitVars *v, const MatmulGeom *m) {
  static const char *const names[] = {"M", "N", "K", "XS_M", "XS_K", "YS_K", "YS_N"};
  const int64_t values[] = {m->m, m->n, m->k, m->xs_m, m->xs_k, m->ys_k, m->ys_n};
  for (int i = 0; i < 7; i++) emit_vari(v, names[i], values[i]);
}

/* NCHW conv2d geometry from x, w (OIHW) and the attrs; bias iff n has a third input.
 * n is shape-checked, so groups divides the channel counts. */
ConvGeom emit_conv_geom(Graph *g, const Node *n) {
  const Shape *x = &graph_node(g, n->in[0])->shape, *w = &graph_node(g, n->in[1])->shape, *o = &n->shape;
  const Attrs *a = &n->a;
  return (ConvGeom){
      .nb = x->dim[0], .c = x->dim[1], .h = x->dim[2], .w = x->dim[3], .oc = o->dim[1], .oh = o->dim[2],
      .ow = o->dim[3], .kh = w->dim[2], .kw = w->dim[3], .groups = a->groups, .cg = x->dim[1] / a->groups,
      .ocg = o->dim[1] / a->groups, .sh = a->stride[0], .sw = a->stride[1], .pt = a->pad[0], .pl = a->pad[1],
      .dh = a->dilation[0], .dw = a->dilation[1], .bias = n->nin == 3,
  };
}

/* Sets the 18 conv variables NB..DW in v (not bias); dies on values over 32 bits. */
void emit_conv_vars(EmitVars *v, const ConvGeom *c) {
  static const char *const names[] = {"NB", "C", "H", "W", "OC", "OH", "OW", "KH", "KW", "GROUPS", "CG", "OCG",
                                      "SH", "SW", "PT", "PL", "DH", "DW"};
  const int64_t values[] = {c->nb, c->c, c->h, c->w, c->oc, c->oh, c->ow, c->kh, c->kw, c->groups, c->cg, c->ocg,
                            c->sh, c->sw, c->pt, c->pl, c->dh, c->dw};
  for (int i = 0; i < 18; i++) emit_vari(v, names[i], values[i]);
}

/* NCHW pool geometry (N*C planes); count_pad only for an AVGPOOL2D that asks for it. */
PoolGeom emit_pool_geom(Graph *g, const Node *n) {
  const Shape *x = &graph_node(g, n->in[0])->shape, *o = &n->shape;
  const Attrs *a = &n->a;
  return (PoolGeom){
      .planes = x->dim[0] * x->dim[1], .h = x->dim[2], .w = x->dim[3], .oh = o->dim[2], .ow = o->dim[3],
      .kh = a->kernel[0], .kw = a->kernel[1], .sh = a->stride[0], .sw = a->stride[1], .pt = a->pad[0],
      .pl = a->pad[1], .count_pad = n->op == OP_AVGPOOL2D && a->count_pad,
  };
}

/* Sets PLANES H W OH OW KH KW SH SW PT PL in v (not COUNT_PAD). */
void emit_pool_vars(EmitVars *v, const PoolGeom *p) {
  static const char *const names[] = {"PLANES", "H", "W", "OH", "OW", "KH", "KW", "SH", "SW", "PT", "PL"};
  const int64_t values[] = {p->planes, p->h, p->w, p->oh, p->ow, p->kh, p->kw, p->sh, p->sw, p->pt, p->pl};
  for (int i = 0; i < 11; i++) emit_vari(v, names[i], values[i]);
}

/* Splits x's dims by the n->a.axes bitmask into a kept and a reduced walk, each
 * coalesced and keeping x's strides; outn outputs of red elements each. */
ReduceGeom emit_reduce_geom(Graph *g, const Node *n) {
  const Shape *x = &graph_node(g, n->in[0])->shape;
  int64_t xs[KILN_MAX_RANK];
  emit_strides(x, xs);
  ReduceGeom r = {.kept = {.nops = 1}, .reduced = {.nops = 1}, .outn = node_numel(n)};
  Shape ks = {0}, rs = {0};
  for (int i = 0; i < x->rank; i++) {   /* x's dims split in two lists, each keeping x's strides */
    bool red = n->a.axes >> i & 1u;
    Shape *s = red ? &rs : &ks;
    (red ? &r.reduced : &r.kept)->strides[0][s->rank] = xs[i];
    s->dim[s->rank++] = x->dim[i];
  }
  emit_coalesce(&ks, 1, r.kept.strides, &r.kept.rank, r.kept.dims);
  emit_coalesce(&rs, 1, r.reduced.strides, &r.reduced.rank, r.reduced.dims);
  r.red = shape_numel(&rs);
  return r;
}

/* The sizes of a conv_transpose2d (x [NB, C, H, W], w [C, OG, KH, KW], out [NB, O, OH,
 * OW]) as the variables every target's template names: NB C H W O OH OW KH KW CG OG SH
 * SW PT PL DH DW (PT/PL: the top/left padding; the bottom/right ones only shape OH/OW). */
void emit_conv_transpose_vars(EmitVars *v, Graph *g, const Node *n) {
  const Shape *x = &graph_node(g, n->in[0])->shape, *w = &graph_node(g, n->in[1])->shape, *o = &n->shape;
  const Attrs *a = &n->a;
  static const char *const names[] = {"NB", "C", "H", "W", "O", "OH", "OW", "KH", "KW",
                                      "CG", "OG", "SH", "SW", "PT", "PL", "DH", "DW"};
  const int64_t values[] = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], o->dim[1], o->dim[2], o->dim[3], w->dim[2],
                            w->dim[3], x->dim[1] / a->groups, w->dim[1], a->stride[0], a->stride[1], a->pad[0],
                            a->pad[1], a->dilation[0], a->dilation[1]};
  for (int i = 0; i < 17; i++) emit_vari(v, names[i], values[i]);
}

/* Topk's order as a condition: value v goes strictly before w (largest first or
 * smallest first, a NaN above every number; equal values, two NaNs too, are not
 * "before": callers order them by index). nan_v/nan_w test v and w for NaN in the
 * target's spelling. Arena string. */
char *emit_topk_before(bool largest, const char *v, const char *w, const char *nan_v, const char *nan_w) {
  if (largest) return kiln_fmt("(%s && !(%s)) || %s > %s", nan_v, nan_w, v, w);
  return kiln_fmt("(%s && !(%s)) || %s < %s", nan_w, nan_v, v, w);
}

/* Init, update and finish text for sum, mean (divides by RED), max and min (NaN wins,
 * tested with the target's v_is_nan) and prod; dies on any other op. */
EmitReduceOp emit_reduce_op(OpKind op, const char *v_is_nan) {
  switch (op) {
  case OP_REDUCE_SUM: return (EmitReduceOp){"0.0f", "acc += v", "acc"};
  case OP_REDUCE_MEAN: return (EmitReduceOp){"0.0f", "acc += v", "acc / (float)RED"};
  case OP_REDUCE_MAX: return (EmitReduceOp){"-INFINITY", kiln_fmt("acc = v > acc || %s ? v : acc", v_is_nan), "acc"};
  case OP_REDUCE_MIN: return (EmitReduceOp){"INFINITY", kiln_fmt("acc = v < acc || %s ? v : acc", v_is_nan), "acc"};
  case OP_REDUCE_PROD: return (EmitReduceOp){"1.0f", "acc *= v", "acc"};
  default: die("reduce op %s", kiln_ops[op].name);
  }
}

/* Product of s->dim[from..to-1]; 1 for an empty range. */
static int64_t dims_prod(const Shape *s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= s->dim[i];
  return p;
}

/* s as OUTER x N x INNER around axis (negative counts from the end); axis must be
 * in range after normalising (shape checking saw to it). */
AxisGeom emit_axis_geom(const Shape *s, int axis) {
  int ax = axis < 0 ? axis + s->rank : axis;
  return (AxisGeom){.axis = ax, .outer = dims_prod(s, 0, ax), .n = ax < s->rank ? s->dim[ax] : 1,
                    .inner = dims_prod(s, ax + 1, s->rank)};
}

/* LayerNorm/RMSNorm as rows of d = dims from n->a.axis on; gamma iff >= 2 inputs,
 * beta iff 3, and the matching affine text for code and doc. */
NormGeom emit_norm_geom(Graph *g, const Node *n) {
  (void)g;
  AxisGeom ax = emit_axis_geom(&n->shape, n->a.axis);
  bool gamma = n->nin >= 2, beta = n->nin >= 3;
  return (NormGeom){
      .rows = ax.outer, .d = ax.n * ax.inner, .gamma = gamma, .beta = beta,
      .affine = kiln_fmt("%s%s", gamma ? " * gamma[j]" : "", beta ? " + beta[j]" : ""),
      .affine_doc = kiln_fmt("%s%s", gamma ? " * gamma" : "", beta ? " + beta" : ""),
  };
}

/* Concat as outer rows of row elements; per input its len and offset at in a row
 * (arena arrays of n->nin). */
ConcatGeom emit_concat_geom(Graph *g, const Node *n) {
  AxisGeom ax = emit_axis_geom(&n->shape, n->a.axis);
  ConcatGeom c = {.outer = ax.outer, .nparts = n->nin};
  c.len = kiln_alloc(sizeof(int64_t) * (size_t)n->nin);
  c.at = kiln_alloc(sizeof(int64_t) * (size_t)n->nin);
  for (int i = 0; i < n->nin; i++) {
    c.len[i] = graph_node(g, n->in[i])->shape.dim[ax.axis] * ax.inner;
    c.at[i] = c.row;
    c.row += c.len[i];
  }
  return c;
}

/* x as OUTER x N x INNER around the gather axis, and nidx = number of indices. */
GatherGeom emit_gather_geom(Graph *g, const Node *n) {
  const Node *x = graph_node(g, n->in[0]);
  AxisGeom ax = emit_axis_geom(&x->shape, n->a.axis);
  return (GatherGeom){.outer = ax.outer, .n = ax.n, .inner = ax.inner, .nidx = node_numel(graph_node(g, n->in[1]))};
}

/* ---- shared rendering ---- */

/* x converted from -> to with the target's spellings in c; x itself if equal dtypes.
 * Arena string. */
const char *emit_cast(const EmitCasts *c, DType from, DType to, const char *x) {
  if (from == to) return x;
  const char *fmt = to == DT_BOOL ? c->to_bool : to == DT_F32 ? c->to_f32 : from == DT_F32 ? c->f32_to_i32 : c->to_i32;
  const char *vars[] = {"X", x, NULL};
  Buf b = {0};
  template_expand(&b, fmt, vars);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Appends (name, value) to v, keeping kv NULL-terminated; strings are not copied.
 * Dies past EMIT_MAX_VARS. */
void emit_var(EmitVars *v, const char *name, const char *value) {
  if (v->n == EMIT_MAX_VARS) die("too many template variables");
  v->kv[2 * v->n] = name;
  v->kv[2 * v->n + 1] = value;
  v->n++;
  v->kv[2 * v->n] = NULL;
}

/* emit_var with value in decimal; a value outside int32 is a user error (kiln_error:
 * tensor too large), since generated code indexes with 32-bit constants. */
void emit_vari(EmitVars *v, const char *name, int64_t value) {
  if (value > INT32_MAX || value < INT32_MIN)
    kiln_error("constant %s = %lld does not fit 32 bits (tensor too large)", name, (long long)value);
  emit_var(v, name, kiln_fmt("%lld", (long long)value));
}

/* emit_var with a 64-bit value in decimal: byte offsets and sizes, which the generated
 * code spells as 64-bit constants once they pass what an int holds. */
void emit_varl(EmitVars *v, const char *name, int64_t value) { emit_var(v, name, kiln_fmt("%lld", (long long)value)); }

/* The attributes that shape a kernel, as a reader wants them in its comment. */
static void describe_attrs(Buf *b, const Node *n) {
  const Attrs *a = &n->a;
  switch (kiln_ops[n->op].family) {
  case FAM_MATMUL:
    if (a->trans_x || a->trans_y) buf_printf(b, ", transposed:%s%s", a->trans_x ? " x" : "", a->trans_y ? " y" : "");
    break;
  case FAM_CONV:
  case FAM_CONV_TRANSPOSE:
    buf_printf(b, ", stride %d,%d pad %d,%d,%d,%d dilation %d,%d groups %d", a->stride[0], a->stride[1], a->pad[0], a->pad[1],
               a->pad[2], a->pad[3], a->dilation[0], a->dilation[1], a->groups);
    break;
  case FAM_POOL:
    buf_printf(b, ", kernel %d,%d stride %d,%d pad %d,%d,%d,%d%s", a->kernel[0], a->kernel[1], a->stride[0], a->stride[1],
               a->pad[0], a->pad[1], a->pad[2], a->pad[3], n->op == OP_AVGPOOL2D && a->count_pad ? " count_pad" : "");
    break;
  case FAM_REDUCE: buf_printf(b, ", axes mask 0x%x%s", a->axes, a->keepdims ? " keepdims" : ""); break;
  case FAM_ATTENTION:
    buf_printf(b, ", scale %s%s", emit_float(a->scale), a->causal ? ", causal" : "");
    if (a->window) buf_printf(b, ", window %d", a->window);
    break;
  case FAM_WRITE: buf_printf(b, ", axis %d%s", a->axis, a->ring ? ", ring" : ""); break;
    case FAM_TOPK: buf_printf(b, ", axis %d, k %d, %s first", a->axis, a->k, a->largest ? "largest" : "smallest"); break;
  case FAM_GATHER_ELEMENTS: case FAM_SCATTER: buf_printf(b, ", axis %d", a->axis); break;
  case FAM_ARGREDUCE: buf_printf(b, ", axis %d%s", a->axis, a->keepdims ? " keepdims" : ""); break;
  case FAM_SOFTMAX: case FAM_CONCAT: case FAM_GATHER: case FAM_NORM: buf_printf(b, ", axis %d", a->axis); break;
  case FAM_TRANSPOSE:
    buf_puts(b, ", perm");
    for (int i = 0; i < n->shape.rank; i++) buf_printf(b, "%s%d", i ? "," : " ", a->perm[i]);
    break;
  default: break;
  }
}

/* One-line description of kernel k: anchor op, dtype, shapes, attrs, fused chain
 * (see kiln.h). Arena string, no newline. */
char *emit_describe(Graph *g, const Kernel *k) {
  const Node *n = graph_node(g, k->nodes[0]);
  Buf b = {0};
  buf_printf(&b, "%s %s ", kiln_ops[n->op].name, dtype_name(n->dtype));
  for (int i = 0; i < n->nin; i++) buf_printf(&b, "%s%s", i ? ", " : "", shape_str(&graph_node(g, n->in[i])->shape));
  buf_printf(&b, " -> %s", shape_str(&n->shape));
  describe_attrs(&b, n);
  for (int j = 1; j < k->nnodes; j++) buf_printf(&b, "%s%s", j == 1 ? ", then " : " + ", kiln_ops[graph_node(g, k->nodes[j])->op].name);
  char *s = kiln_strdup(b.data);
  buf_free(&b);
  return s;
}

/* See kiln.h. A pair (input, max) checked once however many writes share it. */
int emit_range_checks(Graph *g, const char *const *param, EmitRangeCheck **out) {
  *out = kiln_alloc(sizeof(EmitRangeCheck) * (size_t)(g->nnodes + 1));
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *w = g->nodes[i];
    if (w->dead || w->op != OP_WRITE) continue;
    const Node *at = graph_node(g, w->in[2]), *x = graph_node(g, w->in[1]);
    if (at->op != OP_INPUT) continue;
    int64_t rows = x->shape.dim[w->a.axis], max = w->a.ring ? INT32_MAX : w->shape.dim[w->a.axis] - rows;
    bool dup = false;
    for (int k = 0; k < n && !dup; k++) dup = (*out)[k].input == at->io_index && (*out)[k].max == max;
    if (dup) continue;
    const char *p = param ? param[at->io_index] : g->inputs[at->io_index].name;
    const char *rowtext = rows == 1 ? kiln_fmt("row %s", p) : kiln_fmt("rows %s .. %s + %lld", p, p, (long long)(rows - 1));
    const char *state = g->prog ? g->prog->states[w->a.state].name : "?";
    (*out)[n++] = (EmitRangeCheck){at->io_index, max, kiln_fmt("%s: %s of %lld%s along axis %d, %s:%d", state, rowtext,
                                                                 (long long)w->shape.dim[w->a.axis],
                                                                 w->a.ring ? " (a ring: any offset >= 0)" : "", w->a.axis,
                                                                 graph_src_name(g, w->loc.file), w->loc.line)};
  }
  return n;
}

/* name as a C identifier: bytes not legal become '_', a leading '_' if empty or
 * starting with a digit. Does not check keywords or uniqueness. Arena string. */
char *emit_ident(const char *name) {
  size_t n = strlen(name);
  char *s = kiln_alloc(n + 2), *o = s;
  if (n == 0 || isdigit((unsigned char)name[0])) *o++ = '_';
  for (size_t i = 0; i < n; i++) *o++ = ident_char(name[i], false) ? name[i] : '_';
  *o = 0;
  return s;
}

/* An ASCII upper-case copy of s, in the arena. */
char *emit_upper(const char *s) {
  char *u = kiln_strdup(s);
  for (char *p = u; *p; p++) *p = (char)toupper((unsigned char)*p);
  return u;
}

/* True if s is a C11 keyword or a name the generated C relies on (NULL, bool,
 * int32_t, main, ...), so user names must avoid it. */
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

/* "n one" or "n many" by n == 1, e.g. "1 input" / "3 inputs"; arena string. */
char *emit_count(int64_t n, const char *one, const char *many) {
  return kiln_fmt("%lld %s", (long long)n, n == 1 ? one : many);
}

/* A C initialiser "{a, b, ...}" of v[0..n-1]; "{0}" when n is 0 so it stays legal. */
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

/* The fewest significant digits (1..9) whose decimal reads back as exactly v. */
static int shortest_digits(float v) {
  char tmp[48];
  for (int p = 1; p < 9; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, (double)v);
    float back = strtof(tmp, NULL);
    if (memcmp(&back, &v, sizeof v) == 0) return p;
  }
  return 9;   /* 9 significant digits always round-trip a float */
}

/* v as a C float literal that reads back bit-exactly, in the fewest digits, always
 * with an 'f' suffix; NaN and infinities as NAN / INFINITY. Arena string. */
char *emit_float(float v) {
  if (isnan(v)) return kiln_strdup("NAN");
  if (isinf(v)) return kiln_strdup(v > 0 ? "INFINITY" : "-INFINITY");
  int p = shortest_digits(v);
  char e[64];
  snprintf(e, sizeof e, "%.*e", p - 1, (double)v);   /* "-1.25e+02": sign, p digits, exponent */
  int exp10 = atoi(strchr(e, 'e') + 1);
  if (exp10 < -4 || exp10 >= 16) {   /* 1e-05f, 3.4028235e+38f: %g drops a bare ".": */
    snprintf(e, sizeof e, "%.*g", p, (double)v);
    return kiln_fmt("%sf", e);
  }
  char digits[16];   /* the p significant digits, placed around the point by hand */
  int nd = 0;
  for (const char *c = e; *c != 'e'; c++)
    if (isdigit((unsigned char)*c)) digits[nd++] = *c;
  Buf b = {0};
  if (v < 0 || (v == 0 && signbit(v))) buf_puts(&b, "-");
  if (exp10 < 0) {
    buf_puts(&b, "0.");
    for (int i = 0; i < -exp10 - 1; i++) buf_puts(&b, "0");
    buf_put(&b, digits, (size_t)nd);
  } else {
    for (int i = 0; i <= exp10; i++) buf_put(&b, i < nd ? &digits[i] : "0", 1);
    buf_puts(&b, ".");
    if (nd > exp10 + 1) buf_put(&b, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
    else buf_puts(&b, "0");
  }
  char *s = kiln_fmt("%sf", b.data);
  buf_free(&b);
  return s;
}

/* The C element type of t ("float", "int32_t", "uint8_t"); dies on an unknown dtype. */
const char *emit_c_type(DType t) {
  switch (t) {
  case DT_F32: return "float";
  case DT_I32: return "int32_t";
  case DT_BOOL: return "uint8_t";
  case DT_I64: return "int64_t";
  }
  die("bad dtype %d", (int)t);
}

/* ---- fused kernels: the epilogue ---- */

/* Bytes no template or model name can contain, so the hooks cannot be mistaken. */
const char emit_hook_epilogue[] = "\001epilogue";
const char emit_hook_fused[] = "\001fused";

/* "file:line", or ":line" when the previous location was in the same file. */
static char *loc_text(const Graph *g, SrcLoc loc, const char *prev_file) {
  const char *file = graph_src_name(g, loc.file);
  if (loc.line <= 0) return kiln_strdup(file);
  if (prev_file && strcmp(prev_file, file) == 0) return kiln_fmt(":%d", loc.line);
  return kiln_fmt("%s:%d", file, loc.line);
}

/* The index into an operand of shape `in` for the element at flat index i of `out`
 * (in broadcasts to out): coalesced, so a same-shape operand reads [i], a scalar
 * [0], a bias along the last dims [i % N], a per-channel value [i / P % C]; in
 * general the sum over the dims it walks of coordinate * stride. A coordinate that
 * divides i divides t->index32 instead when out has under 2^31 elements: C compilers
 * vectorise 32-bit division by a constant, not 64-bit, and the loop with it. With t->col,
 * the coordinate along out's last dim (i % N, N that dim) is t->col, the column the
 * template passes: a bias is then read at consecutive addresses, not gathered. With
 * t->row as well (the template passes the row index i / N), every other coordinate is one
 * of the row (an attention mask that every head shares: [row % M * N + j]; RoPE's table
 * over the heads: [row / H * N + j]), which a loop along the row holds fixed, so the
 * operand too is read at consecutive addresses. A same-shape operand still reads [i]. */
static char *operand_index(const Shape *in, const Shape *out, const EmitTarget *t) {
  int64_t st[2][KILN_MAX_RANK], dims[KILN_MAX_RANK];
  int r;
  const char *sfx = t->int_suffix;
  const char *wide_i = shape_numel(out) <= INT32_MAX ? t->index32 : "i";
  emit_strides(out, st[0]);
  emit_bcast_strides(in, out, st[1]);
  emit_coalesce(out, 2, st, &r, dims);
  const int64_t n = out->rank > 0 ? out->dim[out->rank - 1] : 1;
  const bool by_row = t->col && t->row && r > 1 && n > 1 && dims[r - 1] % n == 0;
  Buf b = {0};
  for (int j = 0; j < r; j++) {
    if (dims[j] == 1 || st[1][j] == 0) continue;
    int64_t inner = 1;
    for (int d = j + 1; d < r; d++) inner *= dims[d];
    buf_puts(&b, b.len ? " + " : "");
    if (t->col && j == r - 1 && j > 0 && out->rank > 0 && dims[j] == n) {
      buf_puts(&b, t->col);
    } else if (by_row && j == r - 1 && st[1][j] == 1) {   /* several trailing dims of out: rows of n */
      buf_printf(&b, "%s %% %lld%s * %lld%s + %s", t->row, (long long)(dims[j] / n), sfx, (long long)n, sfx, t->col);
      continue;
    } else if (by_row && j < r - 1) {   /* inner is a multiple of dims[r - 1], so of n */
      buf_puts(&b, t->row);
      if (inner != n) buf_printf(&b, " / %lld%s", (long long)(inner / n), sfx);
      if (j > 0) buf_printf(&b, " %% %lld%s", (long long)dims[j], sfx);
    } else {
      buf_puts(&b, inner != 1 || j > 0 ? wide_i : "i");
      if (inner != 1) buf_printf(&b, " / %lld%s", (long long)inner, sfx);
      if (j > 0) buf_printf(&b, " %% %lld%s", (long long)dims[j], sfx);
    }
    if (st[1][j] != 1) buf_printf(&b, " * %lld%s", (long long)st[1][j], sfx);
  }
  char *s = kiln_strdup(b.len ? b.data : "0");
  buf_free(&b);
  return s;
}

/* What a reader knows value x as: the kernel that computes it (through views: "a
 * view of <kernel>"), an input's or weight's name, else its op. */
static const char *value_name(Graph *g, const Node *x) {
  const Node *r = x;
  while (r->op == OP_RESHAPE) r = graph_node(g, r->in[0]);
  const char *name = r->kernel >= 0 && r->kernel < g->nkernels ? g->kernels[r->kernel].cname
                     : r->op == OP_INPUT && r->io_index >= 0 && r->io_index < g->ninputs ? g->inputs[r->io_index].name
                     : r->name && *r->name ? r->name : kiln_ops[r->op].name;
  if (r->kernel >= 0) name = kiln_fmt("the result of %s", name);
  return r == x ? name : kiln_fmt("a view of %s", name);
}

/* idx without any occurrence of name (NULL: idx itself). Arena string. */
static const char *without(const char *idx, const char *name) {
  for (const char *c; name && (c = strstr(idx, name));) idx = kiln_fmt("%.*s%s", (int)(c - idx), idx, c + strlen(name));
  return idx;
}

/* Records whether the operand index idx (operand_index) reads the flat index i, the
 * column t->col, the row t->row, or some of them (neither name holds an i). */
static void note_index_use(EmitEpilogue *e, const char *idx, const EmitTarget *t) {
  e->uses_col |= t->col && strstr(idx, t->col);
  e->uses_row |= t->row && strstr(idx, t->row);
  e->uses_index |= strchr(without(without(idx, t->col), t->row), 'i') != NULL;
}

/* Index of x among e's extra operands, appending it if new. */
static int extra_slot(EmitEpilogue *e, Node *x) {
  for (int i = 0; i < e->nextra; i++)
    if (e->extra[i] == x) return i;
  e->extra[e->nextra] = x;
  e->extra_name[e->nextra] = kiln_fmt("e%d", e->nextra);
  return e->nextra++;
}

/* A conv's fused batchnorm as a chain step (pass_group): its batchnorm kernel's formula,
 * (v - mean) / sqrt(var + eps) * gamma + beta, the four [C] operands read at the
 * element's channel (dim 1). */
static const char *bn_step_expr(Graph *g, const Node *n, const char *v, const Shape *out, const EmitTarget *t,
                                EmitEpilogue *e) {
  Shape ch = *out;   /* the [C] operands as [1, C, 1, ...] */
  for (int d = 0; d < ch.rank; d++)
    if (d != 1) ch.dim[d] = 1;
  const char *idx = operand_index(&ch, out, t), *p[4];
  note_index_use(e, idx, t);
  for (int k = 0; k < 4; k++) p[k] = kiln_fmt("%s[%s]", e->extra_name[extra_slot(e, graph_node(g, n->in[k + 1]))], idx);
  return kiln_fmt("(%s - %s) / %s(%s + %s) * %s + %s", v, p[0], lookup_fn(t->fns, "sqrt", 4), p[1],
                  emit_float(n->a.eps), p[2], p[3]);
}

/* One chain step: node n applied to the running value `v` (its input at position
 * pos), the other operands read at the element's index. Returns the expression. */
static const char *step_expr(Graph *g, const Node *n, int pos, const char *v, const Shape *out, const EmitTarget *t,
                             EmitEpilogue *e) {
  if (kiln_ops[n->op].family == FAM_CAST) return emit_cast(t->casts, graph_node(g, n->in[0])->dtype, n->dtype, v);
  if (n->op == OP_BATCHNORM) return bn_step_expr(g, n, v, out, t, e);
  const char *ops[3];
  for (int i = 0; i < n->nin; i++) {
    if (i == pos) {
      ops[i] = v;
      continue;
    }
    Node *x = graph_node(g, n->in[i]);
    if (x->op == OP_CONST && x->dtype == DT_F32 && node_numel(x) == 1) {   /* fixed at build time: a literal */
      ops[i] = emit_float(*(const float *)x->data);
      continue;
    }
    int slot = extra_slot(e, x);
    const char *idx = operand_index(&x->shape, out, t);
    note_index_use(e, idx, t);
    ops[i] = kiln_fmt("%s[%s]", e->extra_name[slot], idx);
  }
  return emit_expr(op_expr(n->op, graph_node(g, n->in[0])->dtype), t->fns, ops, n->nin);
}

/* e->ops and e->lines: every op of the kernel, and every distinct Lua line. */
static void describe_chain(Graph *g, const Kernel *k, EmitEpilogue *e) {
  Buf ops = {0}, lines = {0};
  const char *prev_file = NULL;
  for (int j = 0; j < k->nnodes; j++) {
    const Node *n = graph_node(g, k->nodes[j]);
    buf_printf(&ops, "%s%s", j ? " + " : "", kiln_ops[n->op].name);
    bool seen = false;
    for (int i = 0; i < j && !seen; i++) {
      const Node *m = graph_node(g, k->nodes[i]);
      seen = m->loc.line == n->loc.line && strcmp(m->loc.file ? m->loc.file : "?", n->loc.file ? n->loc.file : "?") == 0;
    }
    if (seen) continue;
    buf_printf(&lines, "%s%s", lines.len ? ", " : "", loc_text(g, n->loc, prev_file));
    prev_file = graph_src_name(g, n->loc.file);
  }
  e->ops = esc_comment(ops.data);
  e->lines = esc_comment(lines.data);
  buf_free(&ops);
  buf_free(&lines);
}

/* The batchnorm a conv kernel applies (pass_group's conv + batchnorm chain: the node
 * after the anchor), or NULL. */
const Node *emit_conv_bn(Graph *g, const Kernel *k) {
  if (k->nnodes < 2 || graph_node(g, k->nodes[0])->op != OP_CONV2D) return NULL;
  const Node *bn = graph_node(g, k->nodes[1]);
  return bn->op == OP_BATCHNORM ? bn : NULL;
}

/* The helper comment's words on where its value sits: " at flat output index i, column j". */
static const char *index_doc(const EmitEpilogue *e, const EmitTarget *t) {
  const char *at[3];
  int n = 0;
  if (e->uses_index) at[n++] = "flat output index i";
  if (e->uses_row) at[n++] = kiln_fmt("row index %s = i / N (N: out's last dim)", t->row);
  if (e->uses_col) {
    at[n] = kiln_fmt("%scolumn %s", n ? "" : "output ", t->col);
    n++;
  }
  return n == 0 ? "" : n == 1 ? kiln_fmt(" at %s", at[0]) : n == 2 ? kiln_fmt(" at %s, %s", at[0], at[1])
                                                                    : kiln_fmt(" at %s, %s, %s", at[0], at[1], at[2]);
}

/* Fills *e for kernel k (see kiln.h): comment lines always; for a fused kernel also
 * the helper fn_name in t's spelling and the extra operands it reads. A conv's
 * batchnorm that t's templates apply themselves (t->conv_bn) is no step of the helper;
 * with nothing after it the kernel has no helper (e->fused false). */
void emit_epilogue(Graph *g, const Kernel *k, const char *kname, const char *fn_name, const EmitTarget *t,
                   EmitEpilogue *e) {
  *e = (EmitEpilogue){.helper = ""};
  describe_chain(g, k, e);
  e->fused = k->nnodes > 1;
  if (!e->fused) return;
  e->fn = fn_name;
  e->extra = kiln_alloc(sizeof(Node *) * (size_t)(3 * k->nnodes));
  e->extra_name = kiln_alloc(sizeof(char *) * (size_t)(3 * k->nnodes));
  const Node *anchor = graph_node(g, k->nodes[0]);
  Buf steps = {0};
  const char *v = "v";
  int j0 = emit_conv_bn(g, k) && t->conv_bn ? 2 : 1;   /* the conv template applies the batchnorm itself */
  if (j0 == k->nnodes) {
    e->fused = false;
    return;
  }
  for (int j = j0; j < k->nnodes; j++) {
    const Node *n = graph_node(g, k->nodes[j]);
    int pos = 0;
    while (pos < n->nin && n->in[pos] != k->nodes[j - 1]) pos++;
    if (pos == n->nin) die("epilogue: %%%d does not read %%%d before it in kernel %s", n->id, k->nodes[j - 1], kname);
    const char *vars[] = {"T", t->type(n->dtype), "V", kiln_fmt("v%d", j), "EXPR",
                          step_expr(g, n, pos, v, &anchor->shape, t, e), "OP", kiln_ops[n->op].name, "LOC",
                          esc_comment(loc_text(g, n->loc, NULL)), NULL};
    template_expand(&steps, template_get(t->step_tmpl), vars);
    v = vars[3];
  }
  Buf params = {0}, doc = {0};
  if (e->uses_index) buf_printf(&params, ", %s i", t->index_type);
  if (e->uses_col) buf_printf(&params, ", %s %s", t->index_type, t->col);
  if (e->uses_row) buf_printf(&params, ", %s %s", t->index_type, t->row);
  for (int i = 0; i < e->nextra; i++) {
    const Node *x = e->extra[i];
    buf_puts(&params, ", ");
    buf_printf(&params, t->read_ptr, t->type(x->dtype));
    buf_puts(&params, e->extra_name[i]);
    const char *ovars[] = {"NAME", e->extra_name[i], "WHAT", esc_comment(value_name(g, x)), "DTYPE", dtype_name(x->dtype),
                           "SHAPE", shape_str(&x->shape), NULL};
    template_expand(&doc, template_get(t->operand_tmpl), ovars);
  }
  const Node *last = graph_node(g, k->nodes[k->nnodes - 1]);
  const char *vars[] = {"FN", fn_name, "KERNEL", kname, "ANCHOR", kiln_ops[anchor->op].name,
                        "CHAIN", esc_comment(strchr(e->ops, '+') + 2), "TV", t->type(anchor->dtype),
                        "TR", t->type(last->dtype), "PARAMS", params.data ? params.data : "",
                        "INDEX_DOC", index_doc(e, t),
                        "EXTRAS", doc.data ? doc.data : "", "STEPS", steps.data, "RESULT", v, NULL};
  Buf h = {0};
  template_expand(&h, template_get(t->helper_tmpl), vars);
  e->helper = kiln_strdup(h.data);
  Buf *all[] = {&steps, &params, &doc, &h};
  for (int i = 0; i < 4; i++) buf_free(all[i]);
}

/* The first occurrence of needle in the n bytes at p, or NULL. */
static const char *find_in(const char *p, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(p + i, needle, k) == 0) return p + i;
  return NULL;
}

/* Copies text with IF_FUSED lines kept (marker removed) or dropped. */
static void apply_fused_lines(Buf *out, const char *text, bool fused) {
  size_t hl = strlen(emit_hook_fused);
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
    const char *m = find_in(p, len, emit_hook_fused);
    if (!m) buf_put(out, p, len);
    else if (fused) {
      buf_put(out, p, (size_t)(m - p));
      buf_put(out, m + hl, len - (size_t)(m - p) - hl);
    }
    p += len;
  }
}

/* At p (just after "hook("): the arguments up to the matching ')', split at the commas
 * outside brackets and stripped of leading blanks, into arg[0..3] (value, index, column,
 * row: the last two NULL when absent); returns the position after the ')'. Dies on a
 * malformed hook (a template bug). */
static const char *hook_args(const char *p, const char *arg[4]) {
  int depth = 0, n = 0;
  const char *from = p, *q = p;
  for (; *q; q++) {
    if (*q == '(' || *q == '[') depth++;
    else if ((*q == ')' || *q == ']') && depth > 0) depth--;
    else if ((*q == ')' || (*q == ',' && depth == 0)) && n < 4) {
      while (*from == ' ') from++;
      arg[n++] = kiln_fmt("%.*s", (int)(q - from), from);
      from = q + 1;
      if (*q == ')') break;
    }
  }
  if (!*q || n < 2 || *q != ')') die("template: $EPILOGUE(value, index) hook without its two to four arguments near \"%.40s\"", p);
  for (int i = 0; i < n; i++)
    if (!*arg[i]) die("template: $EPILOGUE hook with an empty argument near \"%.40s\"", p);
  for (int i = n; i < 4; i++) arg[i] = NULL;
  return q + 1;
}

/* text with every $EPILOGUE(value, index) hook rewritten (the value itself unless
 * fused) and $IF_FUSED lines kept or dropped; dies on a malformed hook. Arena string. */
char *emit_epilogue_apply(const char *text, const EmitEpilogue *e) {
  Buf lines = {0}, out = {0};
  apply_fused_lines(&lines, text, e->fused);
  size_t hl = strlen(emit_hook_epilogue);
  const char *p = lines.data ? lines.data : "";
  for (const char *m; (m = strstr(p, emit_hook_epilogue));) {
    buf_put(&out, p, (size_t)(m - p));
    if (m[hl] != '(') die("template: $EPILOGUE not followed by (value, index)");
    const char *arg[4];   /* value, index, column, row */
    p = hook_args(m + hl + 1, arg);
    if (!e->fused) {
      buf_puts(&out, arg[0]);
      continue;
    }
    if (e->uses_col && !arg[2]) die("template: $EPILOGUE(value, index) hook without the column its helper %s reads", e->fn);
    if (e->uses_row && !arg[3]) die("template: $EPILOGUE hook without the row its helper %s reads", e->fn);
    buf_printf(&out, "%s(%s", e->fn, arg[0]);
    if (e->uses_index) buf_printf(&out, ", %s", arg[1]);
    if (e->uses_col) buf_printf(&out, ", %s", arg[2]);
    if (e->uses_row) buf_printf(&out, ", %s", arg[3]);
    for (int i = 0; i < e->nextra; i++) buf_printf(&out, ", %s", e->extra_name[i]);
    buf_puts(&out, ")");
  }
  buf_puts(&out, p);
  char *s = kiln_strdup(out.data ? out.data : "");
  buf_free(&lines);
  buf_free(&out);
  return s;
}
