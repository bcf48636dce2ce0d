/*
 * emit_c_kernels.c — the C target's kernels: one render function per OpFamily, each
 * mapping its family's geometry (emit_common.c) to a template's variables, and the call
 * of each kernel from the run function with its operands' pointers (emit_c.c writes the
 * files around them; the design is described there).
 */
#include "emit_c.h"

#include <stdlib.h>

/* The node that owns the bytes a value lives in: RESHAPE views are followed down. */
static Node *storage_root(Graph *g, Node *n) {
  while (n->op == OP_RESHAPE) n = input(g, n, 0);
  return n;
}

/* The C expression for the bytes of one 32-row panel of a weight in format f whose rows
 * have k values (the K of the kernel), from the block constants of templates/c/deq/. */
static const char *panel_bytes_expr(WFormat f, const char *k) {
  switch (f) {
  case WF_F16: case WF_BF16: return kiln_fmt("%s * 2 * KILN_QPANEL", k);
  case WF_I8: return kiln_fmt("KILN_QPANEL * (4 + %s)", k);
  case WF_Q8_0: return kiln_fmt("%s / 32 * KILN_Q8_0_BLOCK", k);
  case WF_Q4_0: return kiln_fmt("%s / 32 * KILN_Q4_0_BLOCK", k);
  case WF_Q4_K: return kiln_fmt("%s / 256 * KILN_Q4_K_BLOCK", k);
  case WF_Q6_K: return kiln_fmt("%s / 256 * KILN_Q6_K_BLOCK", k);
  case WF_G8: return kiln_fmt("%s / 64 * KILN_G8_BLOCK", k);
  case WF_G4: return kiln_fmt("%s / 64 * KILN_G4_BLOCK", k);
  default: die("C: no panel layout for format %d", (int)f);
  }
}

/* ---- binding operands in the run function ---- */

/* The pointer expression for value n inside the run function, typed for a kernel
 * parameter (const when read). */
static const char *operand_ptr(const Ctx *c, Node *n, bool write) {
  Node *r = storage_root(c->g, n);
  const char *t = stored_format(r) ? "unsigned char" : emit_c_type(n->dtype), *cq = write ? "" : "const ";
  int64_t delta = n->offset - r->offset;
  const char *plus = delta ? kiln_fmt(" + %lld", (long long)delta) : "";
  switch (n->region) {
  case REG_WEIGHTS:
    if (!c->wname[r->id]) die("C: weight %%%d has no offset name", r->id);
    if (write) die("C: kernel writes into the weights (%%%d)", n->id);
    return kiln_fmt("(const %s *)(w + %s%s)", t, c->wname[r->id], plus);
  case REG_ARENA:
    if (!c->aname[r->id]) die("C: arena value %%%d has no offset name", r->id);
    return kiln_fmt("(%s%s *)(a + %s%s)", cq, t, c->aname[r->id], plus);
  case REG_INPUT:
    if (write) die("C: kernel writes into input %d", n->io_slot);
    c->in_read[n->io_slot] = true;
    if (c->in_byval && c->in_byval[n->io_slot]) return kiln_fmt("&%s", c->in_param[n->io_slot]);
    if (n->offset) return kiln_fmt("(const %s *)((const unsigned char *)%s + %lld)", t, c->in_param[n->io_slot], (long long)n->offset);
    return c->in_param[n->io_slot];
  case REG_OUTPUT:
    if (n->offset) return kiln_fmt("(%s%s *)((unsigned char *)%s + %lld)", cq, t, c->out_param[n->io_slot], (long long)n->offset);
    return c->out_param[n->io_slot];
  case REG_STATE:
    if (!c->sname || r->a.state < 0 || r->a.state >= c->g->prog->nstates) die("C: state value %%%d has no offset name", r->id);
    return kiln_fmt("(%s%s *)(s + %s%s)", cq, t, c->sname[r->a.state], plus);
  case REG_NONE: break;
  }
  die("C: value %%%d has no memory region (was pass_memplan run?)", n->id);
}

/* ---- kernels: one render function per family ---- */

/* What every family's render function gets. */
typedef struct {
  const Ctx *c;
  Graph *g;
  Node *n;
  EmitVars v;      /* NAME, DESC, LOC already set */
  bool fused;      /* the anchor has a chain after it (a conv's batchnorm, elementwise nodes) */
  const EmitEpilogue *e;   /* the chain's helper and extra operands */
} KernelCtx;

#define IN(i) input(k->g, k->n, (i))

/* An elementwise walk as C loops: the innermost dim becomes the inner loop of INNER
 * elements, the outer dims ROWS rows whose start per operand comes from the row
 * index split over them; the inner strides apart. */
typedef struct {
  int rank;                        /* outer rank, >= 1 (padded with a size-1 dim) */
  int64_t dims[KILN_MAX_RANK];
  int64_t strides[EMIT_MAX_WALK][KILN_MAX_RANK];
  int64_t rows, inner, inner_stride[EMIT_MAX_WALK];
} Loops;

/* Splits a coalesced walk (rank >= 1) into the inner loop (last dim) and the outer
 * rows; a rank-1 walk gets one size-1 outer dim with zero strides so rank stays >= 1. */
static Loops loops_split(const EmitWalk *w) {
  Loops l = {0};
  int r = w->rank;
  l.inner = w->dims[r - 1];
  for (int k = 0; k < w->nops; k++) l.inner_stride[k] = w->strides[k][r - 1];
  l.rank = r - 1;
  l.rows = 1;
  for (int i = 0; i < l.rank; i++) {
    l.dims[i] = w->dims[i];
    l.rows *= w->dims[i];
    for (int k = 0; k < w->nops; k++) l.strides[k][i] = w->strides[k][i];
  }
  if (l.rank == 0) {
    l.rank = 1;
    l.dims[0] = 1;
    for (int k = 0; k < w->nops; k++) l.strides[k][0] = 0;
  }
  return l;
}

/* Sets ROWS, INNER, RANK, DIMS in k->v, and per operand i < nops with a non-NULL
 * stride_names[i] that name to operand i's outer strides. */
static void loops_vars(KernelCtx *k, const Loops *l, const char *const *stride_names, int nops) {
  emit_vari(&k->v, "ROWS", l->rows);
  emit_vari(&k->v, "INNER", l->inner);
  emit_vari(&k->v, "RANK", l->rank);
  emit_var(&k->v, "DIMS", emit_int_list(l->dims, l->rank));
  for (int i = 0; i < nops; i++)
    if (stride_names[i]) emit_var(&k->v, stride_names[i], emit_int_list(l->strides[i], l->rank));
}

/* "x[xo + j]" for an operand walked contiguously in the inner loop, "x[xo]" when
 * broadcast along it. */
static const char *inner_operand(const char *arr, const char *start, int64_t stride) {
  if (stride == 0) return kiln_fmt("%s[%s]", arr, start);
  if (stride == 1) return kiln_fmt("%s[%s + j]", arr, start);
  die("C: inner stride %lld of %s is neither 0 nor 1 after coalescing", (long long)stride, arr);
}

/* Unary family: sets TX, T, N, EXPR (the op's expr on x[i]); returns its template.
 * Operand and result are contiguous with the same element count. */
static const char *k_unary(KernelCtx *k) {
  const char *ops[] = {"x[i]"};
  emit_var(&k->v, "TX", emit_c_type(IN(0)->dtype));
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_vari(&k->v, "N", node_numel(k->n));
  emit_var(&k->v, "EXPR", emit_expr(op_expr(k->n->op, IN(0)->dtype), emit_c_fns, ops, 1));
  return "c/unary.c.tmpl";
}

/* Binary family with broadcasting: picks the flat, one-outer-dim (rows) or general
 * strided template by the coalesced walk; sets the strides and EXPR it needs. */
static const char *k_binary(KernelCtx *k) {
  EmitWalk w = emit_elementwise_walk(k->g, k->n);
  Loops l = loops_split(&w);
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_var(&k->v, "TX", emit_c_type(IN(0)->dtype));
  const char *expr = op_expr(k->n->op, IN(0)->dtype);
  if (l.rows == 1) {   /* contiguous or scalar operands: one flat loop */
    const char *ops[] = {l.inner_stride[1] ? "x[i]" : "x[0]", l.inner_stride[2] ? "y[i]" : "y[0]"};
    emit_vari(&k->v, "N", l.inner);
    emit_var(&k->v, "EXPR", emit_expr(expr, emit_c_fns, ops, 2));
    return "c/binary.c.tmpl";
  }
  const char *names[] = {NULL, "XSTRIDES", "YSTRIDES"};
  loops_vars(k, &l, names, 3);
  const char *ops[] = {inner_operand("x", "xo", l.inner_stride[1]), inner_operand("y", "yo", l.inner_stride[2])};
  emit_var(&k->v, "EXPR", emit_expr(expr, emit_c_fns, ops, 2));
  if (l.rank > 1) return "c/binary_bcast.c.tmpl";
  emit_vari(&k->v, "X_ROW", l.strides[1][0]);   /* one outer dim: rows (bias adds, row scales) */
  emit_vari(&k->v, "Y_ROW", l.strides[2][0]);
  return "c/binary_rows.c.tmpl";
}

/* Select (where) family: three broadcast operands walked as strided loops; sets the
 * X/Y/ZSTRIDES, T and EXPR variables and returns the select template. */
static const char *k_select(KernelCtx *k) {
  EmitWalk w = emit_elementwise_walk(k->g, k->n);
  Loops l = loops_split(&w);
  const char *names[] = {NULL, "XSTRIDES", "YSTRIDES", "ZSTRIDES"};
  loops_vars(k, &l, names, 4);
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  const char *ops[] = {inner_operand("x", "xo", l.inner_stride[1]), inner_operand("y", "yo", l.inner_stride[2]),
                       inner_operand("z", "zo", l.inner_stride[3])};
  emit_var(&k->v, "EXPR", emit_expr(kiln_ops[k->n->op].expr, emit_c_fns, ops, 3));
  return "c/select.c.tmpl";
}

/* The C spelling of conversions between dtypes (emit_common.c picks one). */
static const EmitCasts c_casts = {
    .to_bool = "(uint8_t)($X != 0)",
    .to_f32 = "(float)$X",
    .to_i32 = "(int32_t)$X",
    .f32_to_i32 = "($X != $X ? 0 : $X >= 2147483648.0f ? INT32_MAX : $X <= -2147483648.0f ? INT32_MIN : (int32_t)$X)",
};

/* Cast family: sets TX, T, N and CONVERT (the C conversion from c_casts, which
 * saturates f32 -> i32 and maps NaN to 0); returns the cast template. */
static const char *k_cast(KernelCtx *k) {
  emit_var(&k->v, "TX", emit_c_type(IN(0)->dtype));
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_vari(&k->v, "N", node_numel(k->n));
  emit_var(&k->v, "CONVERT", emit_cast(&c_casts, IN(0)->dtype, k->n->dtype, "x[i]"));
  return "c/cast.c.tmpl";
}

enum { CONV_PATCH_MIN = 64, CONV_PATCH_MAX = 8192 };   /* taps of a gathered conv patch (at most 32 KiB of stack) */

/* The value of template variable name in v; dies if unset (an emitter bug). */
static const char *var_of(const EmitVars *v, const char *name) {
  for (int i = 0; i < v->n; i++)
    if (strcmp(v->kv[2 * i], name) == 0) return v->kv[2 * i + 1];
  die("C: template variable %s unset", name);
}

/* A kernel's parameters gathered in a struct for the function its tasks run: for the
 * nfixed (type, name) pairs, then the epilogue's extra operands, FIELDS (the members, one a
 * line), LOCALS (each read back as a restrict pointer), INIT (", name" each), SARGS
 * (", s->name" each) and RPARAMS (", const T *restrict name" each: the parameters of a
 * helper that s is unpacked into) in *v. */
static void task_args(KernelCtx *k, EmitVars *v, const char *const *types, const char *const *names, int nfixed) {
  Buf fields = {0}, locals = {0}, init = {0}, sargs = {0}, rparams = {0};
  for (int i = 0; i < nfixed + k->e->nextra; i++) {
    const char *t = i < nfixed ? types[i] : emit_c_type(k->e->extra[i - nfixed]->dtype);
    const char *nm = i < nfixed ? names[i] : k->e->extra_name[i - nfixed];
    buf_printf(&fields, "\n  const %s *%s;", t, nm);
    buf_printf(&locals, "\n  const %s *restrict %s = s->%s;", t, nm, nm);
    buf_printf(&init, ", %s", nm);
    buf_printf(&sargs, ", s->%s", nm);
    buf_printf(&rparams, ", const %s *restrict %s", t, nm);
  }
  Buf *all[] = {&fields, &locals, &init, &sargs, &rparams};
  const char *vars[] = {"FIELDS", "LOCALS", "INIT", "SARGS", "RPARAMS"};
  for (int i = 0; i < 5; i++) {
    emit_var(v, vars[i], all[i]->len ? kiln_strdup(all[i]->data) : "");
    buf_free(all[i]);
  }
}

/* A product's store variables when its sums are the result: no store function. */
static void store_none(KernelCtx *k) {
  emit_var(&k->v, "STORE", "");
  emit_var(&k->v, "STORE_ARGS", "");
  emit_var(&k->v, "STORE_CALL", "NULL, NULL");
}

/* A product's store function from template tmpl over sv (whose INIT lists its operands):
 * STORE, STORE_ARGS (the struct the tasks read) and STORE_CALL. */
static void store_from(KernelCtx *k, const char *tmpl, EmitVars *sv) {
  const char *name = var_of(&k->v, "NAME");
  emit_var(sv, "EPILOGUE", emit_hook_epilogue);
  emit_var(&k->v, "STORE", expand_str(tmpl, sv));
  emit_var(&k->v, "STORE_ARGS", kiln_fmt("  const %s_out s = {out%s};\n", name, var_of(sv, "INIT")));
  emit_var(&k->v, "STORE_CALL", kiln_fmt("%s_store, &s", name));
}

/* A matmul kernel's store (matmul_store.c.tmpl), which kiln_gemm_par runs in each task on
 * the outputs it finished: the epilogue's chain. Sets STORE (its definition, "" when the
 * sums are the result), STORE_ARGS and STORE_CALL. Swapped, C is out transposed: C's rows
 * are out's columns. */
static void matmul_store(KernelCtx *k, bool swapped) {
  if (!k->fused) {
    store_none(k);
    return;
  }
  EmitVars sv = {0};
  task_args(k, &sv, NULL, NULL, 0);
  const char *copy[] = {"NAME", "M", "N", "EPARAMS"};
  for (int i = 0; i < 4; i++) emit_var(&sv, copy[i], var_of(&k->v, copy[i]));
  const char *const rows[] = {"i_lo", "i_hi"}, *const cols[] = {"j_lo", "j_hi"};
  emit_var(&sv, "R_LO", (swapped ? cols : rows)[0]);
  emit_var(&sv, "R_HI", (swapped ? cols : rows)[1]);
  emit_var(&sv, "C_LO", (swapped ? rows : cols)[0]);
  emit_var(&sv, "C_HI", (swapped ? rows : cols)[1]);
  emit_var(&sv, "SWAP_DOC", swapped ? " (the product is computed transposed: its rows i are out's columns)" : "");
  /* A chain calling Kiln's exp, erf, tanh or log is bound by their polynomials: its loop
   * also gets an AVX-512 twin (rows512.c.tmpl) that an AVX2 build picks at run time. */
  const char *h = k->e->helper;
  const bool math = strstr(h, "kiln_expf(") || strstr(h, "kiln_erff(") || strstr(h, "kiln_tanhf(") || strstr(h, "kiln_logf(");
  emit_var(&sv, "ROWS_HEAD", math ? "KILN_INLINE" : "KILN_NOINLINE static");
  emit_var(&sv, "ROWS_SUFFIX", math ? "_in" : "");
  emit_var(&sv, "EARGS", var_of(&sv, "INIT"));
  emit_var(&sv, "TWIN_PARAMS", kiln_fmt("float *restrict out%s, int64_t b, int64_t r_lo, int64_t r_hi, int64_t c_lo, int64_t c_hi",
                                        var_of(&sv, "EPARAMS")));
  emit_var(&sv, "TWIN_ARGS", kiln_fmt("out%s, b, r_lo, r_hi, c_lo, c_hi", var_of(&sv, "INIT")));
  emit_var(&sv, "ROWS512", math ? expand_str("c/rows512.c.tmpl", &sv) : "");
  store_from(k, "c/matmul_store.c.tmpl", &sv);
}

/* The kiln_gemm call of a matmul kernel (matmul_call.c.tmpl) over operands x and y and
 * result o, of the kernel's static `batch` when batched. Plain: A = x, B = y, read in place
 * or, when y is a packed weight, as its panels. Swapped (matmul_swapped: under 4 columns):
 * C^T = y^T x^T, so A = y^T, B = x^T (x's panels when packed) and C is stored transposed.
 * Sets HOW, the kernel comment's note; a weight in a stored format gets kiln_qgemm_par
 * (matmul_qcall.c.tmpl), without batch (its kernel loops over the matrices, the store's
 * matrix index bi) but with the same store. */
static char *matmul_call(KernelCtx *k, bool swapped, bool batched, const char *x, const char *y, const char *o) {
  const Node *xn = IN(0), *yn = IN(1);
  EmitVars v = {0};
  const char *const plain[] = {"ROWS", "M", "COLS", "N", "A", x, "AS_M", "XS_M", "AS_K", "XS_K", "BS_K", "YS_K",
                               "BS_N", "YS_N", "C", o, "CS_I", "N", "CS_J", "1"};
  const char *const swap[] = {"ROWS", "N", "COLS", "M", "A", y, "AS_M", "YS_N", "AS_K", "YS_K", "BS_K", "XS_K",
                              "BS_N", "XS_M", "C", o, "CS_I", "1", "CS_J", "N"};
  const char *const *kv = swapped ? swap : plain;
  for (int i = 0; i < 20; i += 2) emit_var(&v, kv[i], kv[i + 1]);
  const Node *bn = swapped ? xn : yn;
  const char *bname = swapped ? x : y;
  const WFormatInfo *q = stored_format(bn);
  emit_var(&k->v, "TX", q && swapped ? "unsigned char" : "float");
  emit_var(&k->v, "TY", q && !swapped ? "unsigned char" : "float");
  matmul_store(k, swapped);
  emit_var(&v, "STORE_CALL", var_of(&k->v, "STORE_CALL"));
  if (q) {
    emit_var(&v, "BI", batched ? "b" : "0");
    emit_var(&v, "W", bname);
    emit_var(&v, "PANEL_BYTES", panel_bytes_expr(bn->wfmt, "K"));
    emit_var(&v, "DEQ", kiln_fmt("kiln_deq_%s", q->name));
    emit_var(&v, "DOT", kiln_fmt("kiln_qdot_%s", q->name));
    emit_var(&k->v, "HOW", kiln_fmt("%s\n * %s is kept as %s, rows in panels of %d, expanded to f32 a block at a time (docs/quantization.md).",
                                    swapped ? "\n * Computed as out^T = y^T x^T: few columns, so x's rows run along the panels." : "",
                                    swapped ? "x" : "y", q->name, KILN_QPANEL));
    return expand_str("c/matmul_qcall.c.tmpl", &v);
  }
  emit_var(&v, "PANELS", bn->pack ? bname : "NULL");
  emit_var(&v, "B", bn->pack ? "NULL" : bname);
  emit_var(&v, "BATCH_ARG", batched ? "&batch" : "NULL");
  emit_var(&k->v, "A_STRIDES", swapped ? "y_stride" : "x_stride");
  emit_var(&k->v, "B_STRIDES", swapped ? "x_stride" : "y_stride");
  const char *how = swapped ? "\n * Computed as out^T = y^T x^T: few columns, so x's rows run along the panels." : "";
  if (bn->pack)
    how = kiln_fmt("%s\n * %s is packed at build time in panels of %d columns (pass_pack).", how, swapped ? "x" : "y",
                   KILN_PANEL);
  emit_var(&k->v, "HOW", how);
  return expand_str("c/matmul_call.c.tmpl", &v);
}

/* Whether the batch of a matmul is really more rows: y is one matrix every batch shares and
 * x's matrices lie back to back, untransposed. */
static bool batch_is_rows(const MatmulGeom *m) {
  return m->batch > 1 && !m->trans_x && m->b.rank == 1 && m->b.strides[1][0] == m->m * m->k && m->b.strides[2][0] == 0;
}

/* Matmul family: sets geometry, batch-broadcast strides and CALL; one template for a single
 * matrix (or a batch that is just more rows of x), the batched one otherwise; a weight in a
 * stored format takes the _q templates (the matrices in a loop). */
static const char *k_matmul(KernelCtx *k) {
  MatmulGeom m = emit_matmul_geom(k->g, k->n);
  MatmulShape ms = matmul_shape(k->g, k->n);   /* before folding a batch into rows: pass_pack's view */
  bool swapped = matmul_swapped(&ms);
  bool q = stored_format(swapped ? IN(0) : IN(1)) != NULL;
  if (!swapped && batch_is_rows(&m)) {
    m.m *= m.batch;
    m.batch = 1;
  }
  emit_matmul_vars(&k->v, &m);
  emit_vari(&k->v, "BATCH", m.batch);
  emit_vari(&k->v, "RANK", m.b.rank);
  emit_var(&k->v, "DIMS", emit_int_list(m.b.dims, m.b.rank));
  emit_var(&k->v, "XSTRIDES", emit_int_list(m.b.strides[1], m.b.rank));
  emit_var(&k->v, "YSTRIDES", emit_int_list(m.b.strides[2], m.b.rank));
  if (m.batch > 1) {
    emit_var(&k->v, "CALL", q ? matmul_call(k, swapped, true, "x + xo", "y + yo", "o") : matmul_call(k, swapped, true, "x", "y", "out"));
    return q ? "c/matmul_batched_q.c.tmpl" : "c/matmul_batched.c.tmpl";
  }
  emit_var(&k->v, "CALL", matmul_call(k, swapped, false, "x", "y", "out"));
  return q ? "c/matmul_q.c.tmpl" : "c/matmul.c.tmpl";
}

/* The fused batchnorm's scale and shift for channel index c (conv_bn_row.c.tmpl), the
 * lines indented by ind; "" without one. */
static const char *bn_row(const Node *bn, const char *c, const char *ind) {
  if (!bn) return "";
  EmitVars v = {0};
  emit_var(&v, "IND", ind);
  emit_var(&v, "C", c);
  emit_var(&v, "EPS", emit_float(bn->a.eps));
  return expand_str("c/conv_bn_row.c.tmpl", &v);
}

/* What a conv stores for a sum `sum` of channel c: plus the bias, then the fused
 * batchnorm's scale and shift (named scale and shift, or read from arrays at [c]). */
static const char *conv_value(bool bias, const Node *bn, const char *sum, const char *bias_at, const char *bn_at) {
  const char *v = bias ? kiln_fmt("%s + bias[%s]", sum, bias_at) : sum;
  if (!bn) return v;
  if (bias) v = kiln_fmt("(%s)", v);
  return bn_at ? kiln_fmt("%s * bn_scale[%s] + bn_shift[%s]", v, bn_at, bn_at) : kiln_fmt("%s * scale + shift", v);
}

/* The read-only operands a convolution's tasks need besides its input, weight and output
 * (the bias, the fused batchnorm's four, the epilogue's extras), through task_args. */
static void task_operands(KernelCtx *k, EmitVars *v, bool bias, const Node *bn) {
  static const char *const bn_names[] = {"bn_mean", "bn_var", "bn_gamma", "bn_beta"};
  const char *types[5], *names[5];
  int n = 0;
  if (bias) types[n] = "float", names[n++] = "bias";
  for (int i = 0; bn && i < 4; i++) types[n] = "float", names[n++] = bn_names[i];
  task_args(k, v, types, names, n);
}

/* conv_gemm's store (conv_gemm_store.c.tmpl), which kiln_conv_par runs in each task on the
 * outputs it finished: the bias, the fused batchnorm and the epilogue's chain. Sets STORE
 * (its definition, "" when the sums are the result), STORE_ARGS and STORE_CALL. */
static void conv_gemm_store(KernelCtx *k, const ConvGeom *c, const Node *bn) {
  if (!c->bias && !k->fused) {
    store_none(k);
    return;
  }
  EmitVars sv = {0};
  const char *copy[] = {"NAME", "OC", "OCG", "OH", "OW"};
  for (int i = 0; i < 5; i++) emit_var(&sv, copy[i], var_of(&k->v, copy[i]));
  task_operands(k, &sv, c->bias, bn);
  emit_var(&sv, "ROW", kiln_fmt("%s%s", c->bias ? "    const float b = bias[oc];\n" : "", bn_row(bn, "oc", "    ")));
  const char *v = c->bias ? "o[p] + b" : "o[p]", *v16 = c->bias ? "o[p + t] + b" : "o[p + t]";
  emit_var(&sv, "VALUE", bn ? kiln_fmt(c->bias ? "(%s) * scale + shift" : "%s * scale + shift", v) : v);
  emit_var(&sv, "VALUE16", bn ? kiln_fmt(c->bias ? "(%s) * scale + shift" : "%s * scale + shift", v16) : v16);
  store_from(k, "c/conv_gemm_store.c.tmpl", &sv);
}

/* Floats of conv_direct's stack buffer (a padded copy of a group's input planes) at most;
 * larger convolutions with few filters keep the plain loops. */
enum { CONV_DIRECT_MAX = 16384 };

/* Whether conv_direct's buffer for c fits CONV_DIRECT_MAX: its rows and columns rounded up
 * to whole blocks of outputs (at most 4 rows, with AVX, by 16 columns). */
static bool conv_direct_fits(const ConvGeom *c) {
  const int64_t ohr = (c->oh + 3) / 4 * 4, owr = (c->ow + 15) / 16 * 16;
  const int64_t hp = (ohr - 1) * c->sh + (c->kh - 1) * c->dh + 1, wp = (owr - 1) * c->sw + (c->kw - 1) * c->dw + 1;
  const int64_t wq = (wp + c->sw - 1) / c->sw;
  return c->oh > 0 && c->ow > 0 && c->cg * hp * c->sw * wq <= CONV_DIRECT_MAX;
}

/* Conv2d family: sets the conv geometry, the bias and fused batchnorm parameters
 * (empty without them) and what each template stores; returns the conv template:
 * conv_wino over filters transformed at build time (Node.wino), conv_lanes over filters
 * packed in panels of 32 (a small image: pass_pack's lanes_fit), else conv_gemm from
 * CONV_GEMM_MIN_OCG filters a group, conv_patch for fewer (but 4 or more)
 * filters over a mid-sized patch, else direct loops: conv_direct over a padded copy of
 * the input when it fits CONV_DIRECT_MAX, conv otherwise. */
static const char *k_conv(KernelCtx *k) {
  ConvGeom c = emit_conv_geom(k->g, k->n);
  const Node *bn = emit_conv_bn(k->g, &k->g->kernels[k->n->kernel]);
  emit_conv_vars(&k->v, &c);
  emit_var(&k->v, "BIAS_PARAM", c.bias ? restrict_param(", ", "float", "bias") : "");
  emit_var(&k->v, "BN_PARAMS",
           bn ? kiln_fmt("%s%s%s%s", restrict_param(", ", "float", "bn_mean"), restrict_param(", ", "float", "bn_var"),
                         restrict_param(", ", "float", "bn_gamma"), restrict_param(", ", "float", "bn_beta"))
              : "");
  if (c.ocg >= KILN_CONV_GEMM_MIN_OCG) {   /* fewer fill too little of a tile (depthwise: one) */
    conv_gemm_store(k, &c, bn);
    emit_var(&k->v, "BIAS_DOC", c.bias ? (bn ? ", then the bias and the batchnorm" : ", then the bias")
                                       : bn ? ", then the batchnorm" : "");
    if (IN(1)->wino) {   /* pass_pack: the filters' F(2x2, 3x3) transforms; memplan: v's band */
      const WinoGeom q = wino_geom(k->g, k->n);
      emit_vari(&k->v, "TH", q.th), emit_vari(&k->v, "TW", q.tw);
      emit_vari(&k->v, "BAND", q.band), emit_vari(&k->v, "LDV", q.ldv);
      return "c/conv_wino.c.tmpl";
    }
    if (IN(1)->pack == KILN_PANEL) {   /* pass_pack: filters across the lanes (lanes_fit); memplan: the padded grid */
      if (!k->g->kernels[k->n->kernel].scratch)   /* lanes_fit's bounds are kernel_scratch's */
        die("C: conv2d %%%d: filters across the lanes without a padded grid", k->n->id);
      return "c/conv_lanes.c.tmpl";
    }
    /* pass_pack: filters stored in blocks of KILN_CONV_BLOCK, tap-major */
    const bool packed = IN(1)->pack != 0;
    emit_var(&k->v, "PACKED", packed ? "1" : "0");
    emit_var(&k->v, "PACKED_DOC", packed ? kiln_fmt(" w is packed: blocks of %d filters, tap-major", KILN_CONV_BLOCK) : "");
    /* pass_memplan's scratch: the padded input, split by stride (kiln_conv_grid) */
    const bool grid = k->g->kernels[k->n->kernel].scratch > 0;
    emit_var(&k->v, "GRID_DOC", grid ? "\n * The input is first copied into pad (arena scratch), zero-padded and split into stride\n"
                                      " * phases, so that each tap of 32 grid pixels is 32 consecutive floats of it." : "");
    emit_var(&k->v, "GRID_PARAM", grid ? ", float *restrict pad" : "");
    emit_var(&k->v, "GRID_ARG", grid ? "pad" : "NULL");
    return "c/conv_gemm.c.tmpl";
  }
  /* Four or more filters a group share each gathered patch (kiln_dot4); the patch lives
   * on the stack, so it stays small, and below CONV_PATCH_MIN taps gathering costs more than
   * the vector dot products save (LeNet's 5x5 first layer). Otherwise the direct loops. */
  int64_t taps = c.cg * c.kh * c.kw;
  if (c.ocg >= 4 && taps >= CONV_PATCH_MIN && taps <= CONV_PATCH_MAX) {
    EmitVars bv = {0};
    emit_var(&bv, "ROW", bn_row(bn, "g * OCG + oc", "        "));
    emit_var(&k->v, "BN_SETUP", bn ? expand_str("c/conv_patch_bn.c.tmpl", &bv) : "");
    emit_var(&k->v, "VALUE_BLOCK", conv_value(c.bias, bn, "acc[t]", "g * OCG + oc + t", "oc + t"));
    emit_var(&k->v, "VALUE_ONE", conv_value(c.bias, bn, "s", "g * OCG + oc", "oc"));
    return "c/conv_patch.c.tmpl";
  }
  if (conv_direct_fits(&c)) {
    EmitVars sv = {0};
    emit_var(&sv, "ROW", kiln_fmt("%s%s", c.bias ? "    const float b = bias[oc];\n" : "", bn_row(bn, "oc", "    ")));
    const char *v = c.bias ? "o[i] + b" : "o[i]", *v16 = c.bias ? "o[i + t] + b" : "o[i + t]";
    emit_var(&sv, "VALUE", bn ? kiln_fmt(c.bias ? "(%s) * scale + shift" : "%s * scale + shift", v) : v);
    emit_var(&sv, "VALUE16", bn ? kiln_fmt(c.bias ? "(%s) * scale + shift" : "%s * scale + shift", v16) : v16);
    emit_var(&sv, "EPILOGUE", emit_hook_epilogue);
    emit_var(&k->v, "STORE", c.bias || bn || k->fused ? expand_str("c/conv_direct_store.c.tmpl", &sv) : "");
    task_operands(k, &k->v, c.bias, bn);
    return "c/conv_direct.c.tmpl";
  }
  const char *store = "";
  if (c.bias || k->fused)
    store = kiln_fmt("\n%s      for (int64_t i = 0; i < OH * OW; i++) o[i] = %s(%s, (n * OC + oc) * (OH * OW) + i);",
                     bn_row(bn, "oc", "      "), emit_hook_epilogue, conv_value(c.bias, bn, "o[i]", "oc", NULL));
  emit_var(&k->v, "STORE", store);
  return "c/conv.c.tmpl";
}

/* Window taps (outputs x taps) a max-pool task covers at least, and its tasks at most:
 * a small pool (LeNet's at batch 1) stays one call on the caller's thread. */
enum { POOL_TASK_TAPS = 32768, POOL_TASKS = 16 };

/* Pool family: max pool or average pool (the latter also gets COUNT_PAD); sets
 * the pool geometry and returns the matching template. A max pool's planes go PER to a
 * task. */
static const char *k_pool(KernelCtx *k) {
  PoolGeom p = emit_pool_geom(k->g, k->n);
  emit_pool_vars(&k->v, &p);
  if (k->n->op == OP_MAXPOOL2D) {
    const double taps = (double)p.planes * (double)(p.oh * p.ow) * (double)(p.kh * p.kw);
    int64_t tasks = taps / POOL_TASK_TAPS < POOL_TASKS ? (int64_t)(taps / POOL_TASK_TAPS) : POOL_TASKS;
    tasks = tasks < 1 ? 1 : tasks > p.planes ? p.planes : tasks;
    emit_vari(&k->v, "PER", p.planes > 0 ? (p.planes + tasks - 1) / tasks : 1);
    task_operands(k, &k->v, false, NULL);
    return "c/maxpool.c.tmpl";
  }
  emit_vari(&k->v, "COUNT_PAD", p.count_pad);
  return "c/avgpool.c.tmpl";
}

/* The kept dims give each output's start; the reduced dims are walked as loops
 * (ROWS rows of INNER elements INNER_STRIDE apart). */
static const char *k_reduce(KernelCtx *k) {
  ReduceGeom r = emit_reduce_geom(k->g, k->n);
  Loops l = loops_split(&r.reduced);
  const EmitWalk *kw = &r.kept;
  emit_vari(&k->v, "OUTN", r.outn);
  emit_vari(&k->v, "RED", r.red);
  emit_vari(&k->v, "ROWS", l.rows);
  emit_vari(&k->v, "INNER", l.inner);
  emit_vari(&k->v, "INNER_STRIDE", l.inner_stride[0]);
  emit_vari(&k->v, "KRANK", kw->rank);
  emit_vari(&k->v, "RRANK", l.rank);
  emit_var(&k->v, "KDIMS", emit_int_list(kw->dims, kw->rank));
  emit_var(&k->v, "KSTRIDES", emit_int_list(kw->strides[0], kw->rank));
  emit_var(&k->v, "RDIMS", emit_int_list(l.dims, l.rank));
  emit_var(&k->v, "RSTRIDES", emit_int_list(l.strides[0], l.rank));
  EmitReduceOp op = emit_reduce_op(k->n->op, "v != v");
  emit_var(&k->v, "INIT", op.init);
  emit_var(&k->v, "UPDATE", op.update);
  emit_var(&k->v, "FINISH", op.finish);
  /* Trailing contiguous dims reduced (sum over the last dim, a global mean): rows. */
  bool rows_form = l.rows == 1 && l.inner_stride[0] == 1 && kw->rank == 1 &&
                   (kw->dims[0] == 1 || kw->strides[0][0] == l.inner);
  return rows_form ? "c/reduce_rows.c.tmpl" : "c/reduce.c.tmpl";
}

/* ROWS512 for a row-wise kernel whose ${NAME}_rows(arg, r_lo, r_hi) its tasks run: the AVX-512
 * twin (rows512.c.tmpl), exp at 16 lanes where an AVX2 build runs on AVX-512, as matmul chains. */
static void rows_twin(KernelCtx *k) {
  EmitVars tv = {0};
  emit_var(&tv, "NAME", var_of(&k->v, "NAME"));
  emit_var(&tv, "TWIN_PARAMS", "const void *arg, int64_t r_lo, int64_t r_hi");
  emit_var(&tv, "TWIN_ARGS", "arg, r_lo, r_hi");
  emit_var(&k->v, "ROWS512", expand_str("c/rows512.c.tmpl", &tv));
}

/* Softmax family over n->a.axis: sets OUTER, N, INNER; a last-axis softmax
 * (INNER == 1) gets the contiguous-rows template, its blocks of rows the tasks. */
static const char *k_softmax(KernelCtx *k) {
  AxisGeom a = emit_axis_geom(&k->n->shape, k->n->a.axis);
  emit_vari(&k->v, "OUTER", a.outer);
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "INNER", a.inner);
  if (a.inner != 1) return "c/softmax.c.tmpl";
  task_args(k, &k->v, NULL, NULL, 0);   /* the last dim: contiguous rows, in blocks as tasks */
  rows_twin(k);
  return "c/softmax_rows.c.tmpl";
}

/* LayerNorm / RMSNorm over the trailing dims: sets ROWS, D, EPS, the optional
 * gamma/beta parameters, the affine step and the task struct (task_args); returns the op's
 * template. */
static const char *k_norm(KernelCtx *k) {
  NormGeom g = emit_norm_geom(k->g, k->n);
  emit_vari(&k->v, "ROWS", g.rows);
  emit_vari(&k->v, "D", g.d);
  emit_var(&k->v, "EPS", emit_float(k->n->a.eps));
  emit_var(&k->v, "PARAMS", kiln_fmt("%s%s", g.gamma ? restrict_param(", ", "float", "gamma") : "",
                                     g.beta ? restrict_param(", ", "float", "beta") : ""));
  emit_var(&k->v, "AFFINE", g.affine);
  emit_var(&k->v, "AFFINE_DOC", g.affine_doc);
  const char *const types[] = {"float", "float"};
  const char *names[2];
  int nfixed = 0;
  if (g.gamma) names[nfixed++] = "gamma";
  if (g.beta) names[nfixed++] = "beta";
  task_args(k, &k->v, types, names, nfixed);
  return k->n->op == OP_LAYERNORM ? "c/layernorm.c.tmpl" : "c/rmsnorm.c.tmpl";
}

/* BatchNorm (inference) on N x C x ...: sets NB, C, PLANE (dims after 1 multiplied)
 * and EPS; returns the batchnorm template. */
static const char *k_batchnorm(KernelCtx *k) {
  AxisGeom a = emit_axis_geom(&k->n->shape, 1);   /* N x C x PLANE */
  emit_vari(&k->v, "NB", a.outer);
  emit_vari(&k->v, "C", a.n);
  emit_vari(&k->v, "PLANE", a.inner);
  emit_var(&k->v, "EPS", emit_float(k->n->a.eps));
  return "c/batchnorm.c.tmpl";
}

/* A strided copy (transpose, slice): rows of the output read from x, blocks of rows the
 * tasks (task_args). On the calling thread alone, the copies feeding attention's head
 * products were most of what BERT did not gain from a second thread, and the products of
 * one thread read what the other's cache held (docs/output.md). */
static const char *k_copy(KernelCtx *k) {
  EmitWalk w = emit_copy_walk(k->g, k->n);
  Loops l = loops_split(&w);
  const char *names[] = {NULL, "XSTRIDES"};
  loops_vars(k, &l, names, 2);
  emit_vari(&k->v, "INNER_STRIDE", l.inner_stride[1]);
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_vari(&k->v, "BASE", w.base);
  emit_var(&k->v, "WALK", k->n->op == OP_TRANSPOSE ? "the permuted dims" : "the slice's steps");
  task_args(k, &k->v, NULL, NULL, 0);
  return "c/copy.c.tmpl";
}

/* Concat family: one read-only parameter x<i> and one copy part per input, each
 * LEN elements landing AT its offset in every output row; returns the concat template. */
static const char *k_concat(KernelCtx *k) {
  ConcatGeom c = emit_concat_geom(k->g, k->n);
  const char *t = emit_c_type(k->n->dtype);
  Buf params = {0}, parts = {0};
  for (int i = 0; i < c.nparts; i++) {
    buf_puts(&params, restrict_param(i ? ", " : "", t, kiln_fmt("x%d", i)));
    EmitVars p = {0};
    emit_var(&p, "K", kiln_fmt("%d", i));
    emit_vari(&p, "LEN", c.len[i]);
    emit_vari(&p, "AT", c.at[i]);
    emit_var(&p, "EPILOGUE", emit_hook_epilogue);
    expand(&parts, "c/concat_part.c.tmpl", &p);
  }
  emit_var(&k->v, "T", t);
  emit_vari(&k->v, "OUTER", c.outer);
  emit_vari(&k->v, "ROW", c.row);
  emit_var(&k->v, "PARAMS", kiln_strdup(params.data));
  emit_var(&k->v, "PARTS", kiln_strdup(parts.data));
  buf_free(&params);
  buf_free(&parts);
  return "c/concat.c.tmpl";
}

/* Gather family: sets T and OUTER, N, INNER, NIDX from the gather geometry (index
 * range checking is the template's job); returns the gather template. */
static const char *k_gather(KernelCtx *k) {
  GatherGeom g = emit_gather_geom(k->g, k->n);
  const WFormatInfo *q = stored_format(IN(0));
  if (q) {   /* pass_quant: a table read by rows, so axis 0 of a matrix (OUTER is 1) */
    emit_var(&k->v, "FORMAT", q->name);
    emit_var(&k->v, "PANEL_BYTES", panel_bytes_expr(IN(0)->wfmt, "INNER"));
    emit_var(&k->v, "DEQ", kiln_fmt("kiln_deq_%s", q->name));
  }
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_vari(&k->v, "OUTER", g.outer);
  emit_vari(&k->v, "N", g.n);
  emit_vari(&k->v, "INNER", g.inner);
  emit_vari(&k->v, "NIDX", g.nidx);
  emit_vari(&k->v, "PANEL", IN(0)->pack);
  if (IN(0)->pack) {   /* pass_pack: the rows of a matmul's B^T, so axis 0 of a matrix */
    if (g.outer != 1 || !IN(0)->pack_t) die("C: gather %%%d from packed %%%d is not by rows", k->n->id, IN(0)->id);
    return "c/gather_packed.c.tmpl";
  }
  return q ? "c/gather_q.c.tmpl" : "c/gather.c.tmpl";
}

/* Argmax/argmin along a.axis: x as OUTER x N x INNER, the comparison that makes a
 * later element win (strictly, so the first of equal ones stays). */
static const char *k_argreduce(KernelCtx *k) {
  AxisGeom a = emit_axis_geom(&IN(0)->shape, k->n->a.axis);
  bool max = k->n->op == OP_ARGMAX;
  emit_vari(&k->v, "OUTER", a.outer);
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "INNER", a.inner);
  emit_var(&k->v, "CMP", max ? ">" : "<");
  emit_var(&k->v, "WHAT", max ? "largest" : "smallest");
  emit_var(&k->v, "TORCH", max ? "argmax" : "argmin");
  return "c/argreduce.c.tmpl";
}

/* gather_elements along a.axis: x as OUTER x N x INNER, the indices and the result as
 * OUTER x NI x INNER. */
static const char *k_gather_elements(KernelCtx *k) {
  AxisGeom x = emit_axis_geom(&IN(0)->shape, k->n->a.axis);
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_vari(&k->v, "OUTER", x.outer);
  emit_vari(&k->v, "N", x.n);
  emit_vari(&k->v, "NI", k->n->shape.dim[k->n->a.axis]);
  emit_vari(&k->v, "INNER", x.inner);
  return "c/gather_elements.c.tmpl";
}

/* topk along a.axis: x as OUTER x N x INNER, K kept; BEFORE says whether value v goes
 * strictly before w (emit_topk_before, shared with Metal). */
static const char *k_topk(KernelCtx *k) {
  AxisGeom a = emit_axis_geom(&IN(0)->shape, k->n->a.axis);
  bool largest = k->n->a.largest;
  emit_vari(&k->v, "OUTER", a.outer);
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "INNER", a.inner);
  emit_vari(&k->v, "K", k->n->a.k);
  emit_var(&k->v, "WHICH", largest ? "largest" : "smallest");
  emit_var(&k->v, "ORDER", largest ? "descending" : "ascending");
  emit_var(&k->v, "BEFORE", emit_topk_before(largest, "v", "w", "v != v", "w != w"));
  return "c/topk.c.tmpl";
}

/* conv_transpose2d: the sizes (emit_conv_transpose_vars) and the optional bias
 * parameter, which starts each output's sum. */
static const char *k_conv_transpose(KernelCtx *k) {
  bool bias = k->n->nin == 3;
  emit_conv_transpose_vars(&k->v, k->g, k->n);
  emit_var(&k->v, "BIAS_PARAM", bias ? restrict_param(", ", "float", "bias") : "");
  emit_var(&k->v, "BIAS_INIT", bias ? "bias[oc]" : "0.0f");
  return "c/conv_transpose.c.tmpl";
}

/* scatter / index_copy along a.axis: x as OUTER x N x INNER, the source as OUTER x NI
 * x INNER; IDX_AT says where an element's index is: its own position (scatter) or
 * the source slice's (index_copy, a vector). */
static const char *k_scatter(KernelCtx *k) {
  AxisGeom x = emit_axis_geom(&IN(0)->shape, k->n->a.axis);
  bool sc = k->n->op == OP_SCATTER;
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_vari(&k->v, "OUTER", x.outer);
  emit_vari(&k->v, "N", x.n);
  emit_vari(&k->v, "NI", IN(2)->shape.dim[k->n->a.axis]);
  emit_vari(&k->v, "INNER", x.inner);
  emit_var(&k->v, "IDX_AT", sc ? "at" : "j");
  emit_var(&k->v, "WHAT", sc ? "scatter: idx has src's shape" : "index_copy: idx is a vector of NI");
  return "c/scatter.c.tmpl";
}

/* Attention family: the sizes of q [HQ, T, D] and k/v [HKV, S, D], GROUP = HQ / HKV,
 * the scale as a float literal, CAUSAL as 0/1 and WINDOW (0: none); returns sdpa.c.tmpl
 * (a row at a time: a decode), or for a prefill sdpa_tiled.c.tmpl with its store's
 * variables (FIELDS, INIT, SARGS, RPARAMS: the epilogue's operands) and KEYS_DOC. */
static const char *k_attention(KernelCtx *k) {
  const Shape *q = &IN(0)->shape, *kv = &IN(1)->shape;
  emit_vari(&k->v, "HQ", q->dim[0]);
  emit_vari(&k->v, "T", q->dim[1]);
  emit_vari(&k->v, "D", q->dim[2]);
  emit_vari(&k->v, "S", kv->dim[1]);
  emit_vari(&k->v, "GROUP", q->dim[0] / kv->dim[0]);
  emit_vari(&k->v, "CAUSAL", k->n->a.causal);
  emit_vari(&k->v, "WINDOW", k->n->a.window);
  emit_var(&k->v, "SCALE", emit_float(k->n->a.scale));
  /* attn_lib keeps key positions in int32 lanes */
  if (q->dim[1] < KILN_ATTN_MIN_T || q->dim[2] > KILN_ATTN_DMAX || kv->dim[1] > INT32_MAX) {
    /* rows (a decode's): blocks of them as tasks, exp at 16 lanes where an AVX2 build runs
     * on AVX-512 (as softmax) */
    task_args(k, &k->v, NULL, NULL, 0);
    rows_twin(k);
    return "c/sdpa.c.tmpl";
  }
  /* a prefill: blocks of queries on the micro-kernel (attn_lib.c.tmpl), the outputs stored
   * by a helper like a matmul's store */
  EmitVars sv = {0};
  task_args(k, &sv, NULL, NULL, 0);
  const char *const copy[] = {"FIELDS", "INIT", "SARGS", "RPARAMS"};
  for (int i = 0; i < 4; i++) emit_var(&k->v, copy[i], var_of(&sv, copy[i]));
  emit_var(&k->v, "CHAIN_DOC", k->fused ? ", then the fused chain" : "");
  const char *keys = k->n->a.window > 0 ? "at positions pos + i - WINDOW < j <= pos + i, j < len, j >= len - S (slot j % S)"
                     : k->n->a.causal    ? "at positions j < min(len, S) and j <= pos + i"
                                         : "at positions j < min(len, S)";
  emit_var(&k->v, "KEYS_DOC", keys);
  return "c/sdpa_tiled.c.tmpl";
}

/* Write family: the state viewed as OUTER x N x INNER around the axis, the value as
 * OUTER x ROWS x INNER; the state is the result (operand 0 is not passed: in place);
 * a ring write (a.ring) wraps its rows modulo N. */
static const char *k_write(KernelCtx *k) {
  AxisGeom a = emit_axis_geom(&k->n->shape, k->n->a.axis);
  emit_var(&k->v, "T", emit_c_type(k->n->dtype));
  emit_var(&k->v, "STATE", esc_comment(k->g->prog ? k->g->prog->states[k->n->a.state].name : "?"));
  emit_vari(&k->v, "OUTER", a.outer);
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "ROWS", IN(1)->shape.dim[a.axis]);
  emit_vari(&k->v, "INNER", a.inner);
  return k->n->a.ring ? "c/write_ring.c.tmpl" : "c/write.c.tmpl";
}

#undef IN

/* Fills k->v for one family and returns the template to expand. */
typedef const char *RenderFn(KernelCtx *k);
static RenderFn *const render[FAM__COUNT] = {
    [FAM_UNARY] = k_unary,         [FAM_BINARY] = k_binary,   [FAM_SELECT] = k_select,
    [FAM_CAST] = k_cast,           [FAM_MATMUL] = k_matmul,   [FAM_CONV] = k_conv,
    [FAM_POOL] = k_pool,           [FAM_REDUCE] = k_reduce,   [FAM_SOFTMAX] = k_softmax,
    [FAM_NORM] = k_norm,           [FAM_BATCHNORM] = k_batchnorm, [FAM_TRANSPOSE] = k_copy,
    [FAM_CONCAT] = k_concat,       [FAM_SLICE] = k_copy,       [FAM_GATHER] = k_gather,
    [FAM_ATTENTION] = k_attention, [FAM_WRITE] = k_write,
    [FAM_ARGREDUCE] = k_argreduce, [FAM_GATHER_ELEMENTS] = k_gather_elements, [FAM_TOPK] = k_topk,
    [FAM_CONV_TRANSPOSE] = k_conv_transpose, [FAM_SCATTER] = k_scatter,
};

/* Kernel pointers are restrict: a kernel's result must not share bytes with anything
 * the kernel reads. pass_memplan promises that; a broken promise would be silent
 * wrong answers. Values inside a fused kernel have no storage and are not read. */
static void check_no_overlap(Graph *g, const Kernel *kr) {
  const Node *r = node(g, kr->nodes[kr->nnodes - 1]);
  for (int j = 0; j < kr->nnodes; j++) {
    const Node *n = node(g, kr->nodes[j]);
    for (int i = 0; i < n->nin; i++) {
      if (n->op == OP_WRITE && i == 0) continue;   /* the version it updates in place: not passed */
      const Node *x = input(g, n, i);
      bool same_buffer = x->region == r->region && (r->region == REG_ARENA || r->region == REG_STATE ||
                                                    ((r->region == REG_OUTPUT) && x->io_slot == r->io_slot));
      if (same_buffer && x->offset < r->offset + node_bytes(r) && r->offset < x->offset + node_bytes(x))
        die("C: %%%d (%s) overlaps %%%d, read by its kernel, in the %s", r->id, kiln_ops[r->op].name, x->id,
            r->region == REG_ARENA ? "arena" : "output buffer");
    }
  }
}

/* The C spelling of what the epilogue of a fused kernel needs (emit_common.c). */
static const EmitTarget c_target = {
    .fns = emit_c_fns, .type = emit_c_type, .casts = &c_casts, .index_type = "int64_t", .int_suffix = "",
    .index32 = "(int32_t)i",
    .read_ptr = "const %s *restrict ", .helper_tmpl = "c/epilogue.c.tmpl", .step_tmpl = "c/epilogue_step.c.tmpl",
    .operand_tmpl = "c/epilogue_operand.c.tmpl", .conv_bn = true,
};

/* Whether n's template stores rows of out's last dim, a row at a time, and passes each
 * element's column and row to its $EPILOGUE hook: a matmul's store; a concat along the
 * last dim; a broadcast binary op whose inner loop is that dim (emit_epilogue then reads an
 * operand fixed along each row at consecutive addresses: operand_index). */
static bool walks_rows(Graph *g, const Node *n) {
  const int64_t last = n->shape.rank > 0 ? n->shape.dim[n->shape.rank - 1] : 1;
  switch (kiln_ops[n->op].family) {
  case FAM_MATMUL: return true;
  case FAM_CONCAT: return emit_concat_geom(g, n).row == last;
  case FAM_BINARY: {
    EmitWalk w = emit_elementwise_walk(g, n);
    Loops l = loops_split(&w);
    return l.rows > 1 && l.inner == last;
  }
  default: return false;
  }
}

/* A call of kernel kr's floating-point operations, for the profile: 2 per multiply-add of
 * its anchor's product (a matmul, a convolution, attention's two products over every key,
 * masks and windows not taken off); 0 for any other kernel. */
static int64_t kernel_flops(Graph *g, const Kernel *kr) {
  const Node *n = node(g, kr->nodes[0]);
  switch (n->op) {
  case OP_MATMUL: {
    const Shape *x = &input(g, n, 0)->shape;   /* rank 2 or more (shape_MATMUL) */
    return 2 * node_numel(n) * x->dim[x->rank - (n->a.trans_x ? 2 : 1)];
  }
  case OP_CONV2D: {   /* w: [OC, C / groups, KH, KW] */
    const Shape *w = &input(g, n, 1)->shape;
    return 2 * node_numel(n) * w->dim[1] * w->dim[2] * w->dim[3];
  }
  case OP_CONV_TRANSPOSE2D: {   /* w: [C, OC / groups, KH, KW]; each input pixel feeds them all */
    const Shape *w = &input(g, n, 1)->shape;
    return 2 * node_numel(input(g, n, 0)) * w->dim[1] * w->dim[2] * w->dim[3];
  }
  case OP_SDPA: {   /* q [Hq, T, D], k [Hkv, S, D]: q k^T, then times v */
    const Shape *q = &input(g, n, 0)->shape, *k = &input(g, n, 1)->shape;
    return 4 * q->dim[0] * q->dim[1] * k->dim[1] * q->dim[2];
  }
  default: return 0;
  }
}

/* With a profile: the tick after kernel ki's call into calls, its row into c->prof_rows. */
static void profile_kernel(const Ctx *c, int ki, const EmitEpilogue *e, Buf *calls) {
  EmitVars v = {0};
  emit_var(&v, "PROF_TICK", c->prof.tick);
  emit_vari(&v, "K", c->prof_base + ki);
  expand(calls, "c/prof_tick.c.tmpl", &v);
  emit_var(&v, "NAME", c->kname[ki]);
  emit_var(&v, "OP", esc_c_string(e->ops));
  emit_var(&v, "LOC", esc_c_string(e->lines));
  emit_varl(&v, "FLOPS", kernel_flops(c->g, &c->g->kernels[ki]));
  expand(c->prof_rows, "c/prof_row.c.tmpl", &v);
}

/* Appends kernel ki's function (after its epilogue helper, if fused) to out and its
 * call to calls. The anchor's family renders the kernel; the chain is the helper. */
/* Contract in emit_c.h. */
void c_emit_kernel(const Ctx *c, int ki, Buf *out, Buf *calls) {
  Graph *g = c->g;
  const Kernel *kr = &g->kernels[ki];
  Node *n = node(g, kr->nodes[0]), *res = node(g, kr->nodes[kr->nnodes - 1]);
  check_no_overlap(g, kr);
  RenderFn *fn = render[kiln_ops[n->op].family];
  if (!fn) die("C: no kernel template for op %s", kiln_ops[n->op].name);
  EmitEpilogue e;
  EmitTarget t = c_target;
  if (walks_rows(g, n)) t.col = "j", t.row = "row";   /* its template passes them */
  emit_epilogue(g, kr, c->kname[ki], c->ename[ki], &t, &e);
  KernelCtx k = {.c = c, .g = g, .n = n, .fused = kr->nnodes > 1, .e = &e};
  emit_var(&k.v, "NAME", c->kname[ki]);
  emit_var(&k.v, "DESC", esc_comment(emit_describe(g, kr)));
  emit_var(&k.v, "LOC", e.lines);
  Buf eparams = {0};
  for (int i = 0; i < e.nextra; i++)
    buf_puts(&eparams, restrict_param(", ", emit_c_type(e.extra[i]->dtype), e.extra_name[i]));
  emit_var(&k.v, "EPARAMS", eparams.len ? kiln_strdup(eparams.data) : "");
  buf_free(&eparams);
  emit_var(&k.v, "EPILOGUE", emit_hook_epilogue);
  emit_var(&k.v, "IF_FUSED", emit_hook_fused);
  const char *tmpl = fn(&k);
  const char *text = emit_epilogue_apply(expand_str(tmpl, &k.v), &e);
  buf_puts(out, e.helper);
  buf_puts(out, text);

  Buf args = {0};
  if (strstr(text, "(const kiln_par *par, ")) buf_puts(&args, "par, ");   /* it splits its work into tasks */
  for (int i = n->op == OP_WRITE; i < n->nin; i++) buf_printf(&args, "%s, ", operand_ptr(c, input(g, n, i), false));
  const Node *bn = emit_conv_bn(g, kr);   /* its statistics and affine: k_conv's BN_PARAMS */
  for (int i = 1; bn && i < 5; i++) buf_printf(&args, "%s, ", operand_ptr(c, input(g, bn, i), false));
  for (int i = 0; i < e.nextra; i++) buf_printf(&args, "%s, ", operand_ptr(c, e.extra[i], false));
  if (kr->scratch) buf_printf(&args, "(float *)(a + %s), ", c->pname[ki]);   /* pass_memplan's */
  buf_puts(&args, operand_ptr(c, res, true));
  EmitVars cv = {0};
  emit_var(&cv, "NAME", c->kname[ki]);
  emit_var(&cv, "ARGS", args.data);
  expand(calls, "c/call.c.tmpl", &cv);
  if (c->prof_rows) profile_kernel(c, ki, &e, calls);
  buf_free(&args);
}
