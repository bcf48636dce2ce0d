/*
 * emit_metal_kernels.c — one render function per OpFamily for the Metal target.
 *
 * Kernel in (a planned node), template variables and a grid out. The geometry is
 * the C target's: each family's walk, strides and sizes come from emit_common.c
 * (emit_matmul_geom, emit_reduce_geom...), the per-op expressions from ops.h
 * through a function table, conversions through a spelling table. What differs is
 * the MSL in templates/metal/, index arithmetic unrolled per thread (index_code)
 * instead of C's loops, and the choice of how threads share the work, made here:
 *   elementwise, cast, batchnorm, pool, copy, concat, gather  one thread per
 *       output element (float4 a thread for contiguous f32 elementwise work);
 *   matmul  32x32 tiles (2x2 outputs a thread) through threadgroup memory, or one SIMD group
 *       per output for a row vector times a transposed matrix (nn.Linear, batch 1); with a
 *       weight in a stored format, one thread per output row for a row vector, the tiles
 *       otherwise, each value expanded by a kiln_w_<format> helper (templates/metal/deq/);
 *   conv    16x16 tiles as an implicit GEMM;
 *   softmax, layernorm, rmsnorm, large reductions  a threadgroup per line with
 *       SIMD-group and threadgroup reductions; small reductions a thread each;
 *   sdpa    a thread per (head, query row), looping over the valid keys only;
 *   write   a thread per element of the value, stored in place into the state.
 * Threadgroups are sized to the work (never above 256), so a short line gets a
 * threadgroup that is not a multiple of 32 and SIMD groups with idle lanes.
 */
#include "emit_metal.h"

#include <limits.h>
#include <string.h>

/* The MSL element type of t ("float", "int", "uchar"); dies on an unknown dtype. */
const char *mtl_type(DType t) {
  switch (t) {
  case DT_F32: return "float";
  case DT_I32: return "int";
  case DT_BOOL: return "uchar";
  case DT_I64: return "int";    /* an i64 input: the host narrowed it to int32 (kiln_mtl_load_input) */
  }
  die("bad dtype %d", (int)t);
}

/* The MSL spelling of ops.h's neutral functions. pow goes to the precise variant:
 * Metal's default fast math computes pow as exp2(y * log2(x)), NaN for x < 0. */
static const EmitFn msl_fns[] = {
    {"exp", "metal::exp"},   {"log", "metal::log"},   {"sqrt", "metal::sqrt"}, {"tanh", "metal::tanh"},
    {"erf", "kiln_erf"},     {"fabs", "metal::fabs"}, {"fmax", "metal::fmax"}, {"fmin", "metal::fmin"},
    {"pow", "metal::precise::pow"}, {"i64", "long"}, {"i32", "int"},   /* i32 arithmetic: widen, wrap back */
    {"sin", "metal::precise::sin"}, {"cos", "metal::precise::cos"},   /* fast math's are coarse far from 0 */
    {"floor", "metal::floor"}, {"ceil", "metal::ceil"}, {"rint", "metal::rint"},
    {"fmod", "metal::precise::fmod"},   /* exact, as C's; fast math's may not be */
    {"round_f16", "kiln_round_f16"},
    {NULL, NULL},
};

/* The MSL spelling of conversions between dtypes (emit_common.c picks one). */
static const EmitCasts msl_casts = {
    .to_bool = "$X != 0",
    .to_f32 = "float($X)",
    .to_i32 = "int($X)",
    .f32_to_i32 = "isnan($X) ? 0 : $X >= 2147483648.0f ? INT_MAX : $X <= -2147483648.0f ? INT_MIN : int($X)",
};

const EmitTarget mtl_target = {
    .fns = msl_fns, .type = mtl_type, .casts = &msl_casts, .index_type = "uint", .int_suffix = "u", .index32 = "i",
    .read_ptr = "device const %s *", .helper_tmpl = "metal/epilogue.metal.tmpl",
    .step_tmpl = "metal/epilogue_step.metal.tmpl", .operand_tmpl = "metal/epilogue_operand.metal.tmpl",
};

/* The node feeding operand i of the kernel's anchor; dies if the id is out of range. */
static Node *in(const MtlKernel *k, int i) { return graph_node(k->g, k->n->in[i]); }

/* ceil(a / b) for a >= 0, b > 0. */
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Records the dispatch: gx x gy x gz threadgroups of tx x ty threads; a grid past
 * Metal's limits is a user error at the node's Lua line. */
static void grid(MtlKernel *k, int64_t gx, int64_t gy, int64_t gz, int64_t tx, int64_t ty) {
  if (gx > UINT32_MAX || gy > 65535 || gz > 65535) kiln_error_at(k->n->loc, "Metal target: grid too large for %s", k->name);
  k->groups[0] = (uint32_t)gx, k->groups[1] = (uint32_t)gy, k->groups[2] = (uint32_t)gz;
  k->threads[0] = (uint32_t)tx, k->threads[1] = (uint32_t)ty, k->threads[2] = 1;
}

/* n threads in one dimension: threadgroups of up to 256, sized down for small n. */
static void grid_1d(MtlKernel *k, int64_t n) {
  int64_t t = n < MTL_MAX_THREADS ? n : MTL_MAX_THREADS;
  grid(k, ceil_div(n, t), 1, 1, t, 1);
}

/* Where operand k of walk w starts: the walk's base for operand 1 (a slice's x). */
static int64_t walk_base(const EmitWalk *w, int k) { return k == 1 ? w->base : 0; }

/* True when operand k's offset is the linear index itself (contiguous, no base,
 * and more than one element: a single element is at offset 0u, said plainly). */
static bool walks_index(const EmitWalk *w, int k) {
  int64_t st = 1;
  for (int d = w->rank - 1; d >= 0; d--) {
    if (w->dims[d] > 1 && w->strides[k][d] != st) return false;
    st *= w->dims[d];
  }
  return walk_base(w, k) == 0 && st > 1;
}

/* Lines that compute `const uint <names[k]> = ...` for each named operand of walk
 * w from the linear element index `idx`: the index itself for a contiguous
 * operand, else its base + the coordinates times its strides (stride 0:
 * broadcast). Only the coordinates some operand needs are computed, so the MSL has
 * no unused variables (clang's -Wall -Werror would say so). */
static char *index_code(const char *idx, const EmitWalk *w, const char *const *names) {
  int rank = w->rank;
  const int64_t *dims = w->dims;
  bool used[KILN_MAX_RANK] = {0}, any_used = false;
  for (int k = 0; k < w->nops; k++) {
    if (!names[k] || walks_index(w, k)) continue;
    for (int d = 0; d < rank; d++)
      if (dims[d] > 1 && w->strides[k][d]) used[d] = any_used = true;
  }
  Buf b = {0};
  if (any_used) {
    int lowest = 0;   /* the outermost used coordinate: no division needed past it */
    while (!used[lowest]) lowest++;
    buf_printf(&b, "  uint rem = %s;\n", idx);
    for (int d = rank - 1; d >= lowest; d--) {
      if (d == lowest) {
        if (d == 0) buf_printf(&b, "  const uint c0 = rem;\n");
        else buf_printf(&b, "  const uint c%d = rem %% %lldu;\n", d, (long long)dims[d]);
        break;
      }
      if (used[d]) buf_printf(&b, "  const uint c%d = rem %% %lldu;\n", d, (long long)dims[d]);
      buf_printf(&b, "  rem /= %lldu;\n", (long long)dims[d]);
    }
  }
  for (int k = 0; k < w->nops; k++) {
    if (!names[k]) continue;
    buf_printf(&b, "  const uint %s = ", names[k]);
    if (walks_index(w, k)) buf_printf(&b, "%s", idx);
    else {
      bool any = false;
      int64_t base = walk_base(w, k);
      if (base) buf_printf(&b, "%lldu", (long long)base), any = true;
      for (int d = 0; d < rank; d++)
        if (dims[d] > 1 && w->strides[k][d]) {
          buf_printf(&b, "%sc%d", any ? " + " : "", d);
          if (w->strides[k][d] != 1) buf_printf(&b, " * %lldu", (long long)w->strides[k][d]);
          any = true;
        }
      if (!any) buf_puts(&b, "0u");
    }
    buf_puts(&b, ";\n");
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* ---- elementwise: unary, binary, select, cast ---- */

/* The scalar expression of the node over its operands named x, y, z. */
static const char *elem_expr(const MtlKernel *k) {
  const Node *n = k->n;
  static const char *const ops[] = {"x", "y", "z"};
  if (kiln_ops[n->op].family != FAM_CAST) return emit_expr(op_expr(n->op, graph_node(k->g, n->in[0])->dtype), msl_fns, ops, n->nin);
  return emit_cast(&msl_casts, in(k, 0)->dtype, n->dtype, "x");
}

/* Unary, binary, select and cast nodes: one thread per element, or four through
 * float4 when every operand is f32 and contiguous or a scalar, the count divides
 * by 4 and every buffer offset (the kernel's result's included) is 16-byte aligned.
 * A fused chain runs per component, its operands read at each element's index. */
static const char *k_elementwise(MtlKernel *k) {
  Node *n = k->n;
  EmitWalk w = emit_elementwise_walk(k->g, n);
  int64_t total = node_numel(n);

  static const char *const pnames[] = {"x", "y", "z"};
  Buf fp = {0};
  for (int i = 0; i < n->nin; i++) {
    const char *vars[] = {"SEP", i ? ", " : "", "T", mtl_type(in(k, i)->dtype), "NAME", pnames[i], NULL};
    template_expand(&fp, template_get("metal/value_param.metal.tmpl"), vars);
  }
  emit_var(&k->v, "FPARAMS", kiln_strdup(fp.data));
  buf_free(&fp);
  emit_var(&k->v, "T", mtl_type(n->dtype));
  emit_var(&k->v, "EXPR", elem_expr(k));

  bool vec = w.rank == 1 && total % 4 == 0 && n->dtype == DT_F32 && k->out->dtype == DT_F32 && k->out->offset % 16 == 0;
  for (int i = 0; i < n->nin && vec; i++) {
    Node *x = in(k, i);
    vec = x->dtype == DT_F32 && (w.strides[i + 1][0] == 1 || node_numel(x) == 1) && x->offset % 16 == 0;
  }
  if (vec) {
    Buf loads = {0}, args = {0};
    for (int i = 0; i < n->nin; i++) {
      const char *vars[] = {"X", pnames[i], NULL};   /* a scalar operand is read once, else four at i */
      const char *load = node_numel(in(k, i)) == 1 ? "metal/load_scalar.metal.tmpl" : "metal/load_float4.metal.tmpl";
      template_expand(&loads, template_get(load), vars);
    }
    static const char comp[] = "xyzw";
    bool fused = k->out != n;   /* four helper calls: one a line */
    for (int c = 0; c < 4; c++) {
      Buf ops = {0};
      for (int i = 0; i < n->nin; i++) {
        const char *ov[] = {"SEP", i ? ", " : "", "X", pnames[i], "COMP",
                            node_numel(in(k, i)) == 1 ? "" : kiln_fmt(".%c", comp[c]), NULL};
        template_expand(&ops, template_get("metal/elementwise4_operand.metal.tmpl"), ov);
      }
      const char *cv[] = {"SEP", c ? (fused ? ",\n      " : ", ") : "", "EPILOGUE", emit_hook_epilogue, "NAME", k->name,
                          "OPERANDS", ops.data ? ops.data : "", "INDEX", c ? kiln_fmt("4 * i + %d", c) : "4 * i", NULL};
      template_expand(&args, template_get("metal/elementwise4_call.metal.tmpl"), cv);
      buf_free(&ops);
    }
    emit_vari(&k->v, "N4", total / 4);
    emit_var(&k->v, "LOADS", kiln_strdup(loads.data));
    emit_var(&k->v, "ARGS4", kiln_strdup(args.data));
    buf_free(&loads);
    buf_free(&args);
    grid_1d(k, total / 4);
    return "metal/elementwise4.metal.tmpl";
  }
  static const char *const onames[] = {NULL, "xo", "yo", "zo"};
  emit_var(&k->v, "INDEX", index_code("i", &w, onames));
  Buf args = {0};
  for (int i = 0; i < n->nin; i++) {
    const char *vars[] = {"SEP", i ? ", " : "", "NAME", pnames[i], "AT", onames[i + 1], NULL};
    template_expand(&args, template_get("metal/operand_at.metal.tmpl"), vars);
  }
  emit_var(&k->v, "ARGS", kiln_strdup(args.data));
  buf_free(&args);
  emit_vari(&k->v, "N", total);
  grid_1d(k, total);
  return "metal/elementwise.metal.tmpl";
}

/* ---- weights kept in a stored format (pass_quant, docs/quantization.md) ---- */

/* Contract in emit_metal.h. */
const WFormatInfo *mtl_stored(const Node *n) {
  return n->op == OP_WEIGHT && n->wfmt != WF_F32 ? wformat_info(n->wfmt) : NULL;
}

/* Sets FORMAT and PB (the bytes of one 32-row panel) for stored weight w, read by the
 * kernel; a weight past 4 GiB is a user error (the kernels offset it in 32 bits). */
static void stored_vars(MtlKernel *k, const Node *w) {
  if (node_stored_bytes(w) > (int64_t)UINT32_MAX)
    kiln_error_at(k->n->loc, "Metal target: weight %s is %lld bytes as %s (a kernel addresses at most 4 GiB of one weight)",
                  w->name, (long long)node_stored_bytes(w), wformat_info(w->wfmt)->name);
  emit_var(&k->v, "FORMAT", wformat_info(w->wfmt)->name);
  emit_var(&k->v, "PB", kiln_fmt("%lldu", (long long)wformat_panel_bytes(w->wfmt, w->shape.dim[1])));
}

/* The expansion of template path with k's variables so far. */
static char *expand_k(const MtlKernel *k, const char *path) {
  Buf b = {0};
  template_expand(&b, template_get(path), k->v.kv);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* ---- matmul ---- */

/* Threads for one line of `len` elements: len itself up to 256. */
static int64_t line_threads(int64_t len) { return len < MTL_MAX_THREADS ? len : MTL_MAX_THREADS; }

/* Matmul reading a stored weight, which pass_quant allows only by rows: y [N, K] read
 * transposed (slot 1, a Linear) or x [M, K] (slot 0, the W of W v), rank 2, so its batch
 * stride is 0. One row of x times y: one thread per output (the 32 rows of a panel in one
 * SIMD group); else the 32x32 tiles of the f32 kernel, the weight's tile expanded as it
 * is loaded. Sets the variables and grid; returns the template. */
static const char *k_matmul_stored(MtlKernel *k, const MatmulGeom *m, int slot) {
  Node *w = in(k, slot);
  if (slot == 1 ? !m->trans_y : m->trans_x) die("Metal: %s reads stored weight %s by columns", k->name, w->name);
  static const char *const onames[2][3] = {{NULL, NULL, "yo"}, {NULL, "xo", NULL}};
  emit_var(&k->v, "BATCH", index_code("b", &m->b, onames[slot]));
  emit_matmul_vars(&k->v, m);
  stored_vars(k, w);
  if (slot == 1 && m->m == 1) {
    int64_t t = line_threads(m->n);
    grid(k, ceil_div(m->n, t), m->batch, 1, t, 1);
    return "metal/matvec_q.metal.tmpl";
  }
  emit_var(&k->v, "STORED", slot ? "y stored [N, K] (read transposed)" : "x stored [M, K]");
  emit_var(&k->v, "STRIDES", slot ? kiln_fmt(", XS_M = %lld, XS_K = %lld", (long long)m->xs_m, (long long)m->xs_k)
                                  : kiln_fmt(", YS_K = %lld, YS_N = %lld", (long long)m->ys_k, (long long)m->ys_n));
  emit_var(&k->v, "LOAD_X", slot ? template_get(m->trans_x ? "metal/matmul_load_xt.metal.tmpl" : "metal/matmul_load_x.metal.tmpl")
                                 : expand_k(k, "metal/matmul_load_xq.metal.tmpl"));
  emit_var(&k->v, "LOAD_Y", slot ? expand_k(k, "metal/matmul_load_yq.metal.tmpl")
                                 : template_get(m->trans_y ? "metal/matmul_load_yt.metal.tmpl" : "metal/matmul_load_y.metal.tmpl"));
  grid(k, ceil_div(m->n, 32), ceil_div(m->m, 32), m->batch, 16, 16);
  return "metal/matmul_q.metal.tmpl";
}

/* Matmul: M == 1 with y transposed (Linear on one row) gets the matvec template, anything
 * else 32x32 output tiles per batch; sets geometry and batch offsets. */
static const char *k_matmul(MtlKernel *k) {
  MatmulGeom m = emit_matmul_geom(k->g, k->n);
  if (mtl_stored(in(k, 0)) || mtl_stored(in(k, 1))) return k_matmul_stored(k, &m, mtl_stored(in(k, 0)) ? 0 : 1);
  /* xo, yo: each operand's matrix start for batch b (the output's is b * M * N) */
  static const char *const onames[] = {NULL, "xo", "yo"};
  bool gemv = m.m == 1 && m.trans_y;
  emit_var(&k->v, "BATCH", index_code("b", &m.b, onames));
  emit_matmul_vars(&k->v, &m);
  if (gemv) {
    int64_t rows = m.n < 8 ? m.n : 8;   /* SIMD groups per threadgroup */
    emit_vari(&k->v, "ROWS", rows);
    grid(k, ceil_div(m.n, rows), m.batch, 1, 32 * rows, 1);
    return "metal/matvec.metal.tmpl";
  }
  /* Loads: thread (ty, tx) fills two slots of each tile (h = 0, 16); which slots
   * depends on the operand's layout, so that consecutive tx read consecutive
   * addresses: along k for x [M, K] and y [N, K], along m or n otherwise. */
  emit_var(&k->v, "LOAD_X", template_get(m.trans_x ? "metal/matmul_load_xt.metal.tmpl" : "metal/matmul_load_x.metal.tmpl"));
  emit_var(&k->v, "LOAD_Y", template_get(m.trans_y ? "metal/matmul_load_yt.metal.tmpl" : "metal/matmul_load_y.metal.tmpl"));
  grid(k, ceil_div(m.n, 32), ceil_div(m.m, 32), m.batch, 16, 16);
  return "metal/matmul.metal.tmpl";
}

/* ---- conv, pools ---- */

/* Conv2d: 16x16 threadgroups over (output pixels, channels of a group), one z per
 * image and group; sets the conv geometry. */
static const char *k_conv(MtlKernel *k) {
  ConvGeom c = emit_conv_geom(k->g, k->n);
  emit_conv_vars(&k->v, &c);
  k->opname[1] = "w";
  if (c.bias) k->opname[2] = "bias";
  emit_var(&k->v, "BIAS_ADD", c.bias ? " + bias[g * OCG + oc]" : "");
  grid(k, ceil_div(c.oh * c.ow, 16), ceil_div(c.ocg, 16), c.nb * c.groups, 16, 16);
  return "metal/conv.metal.tmpl";
}

/* Max or average pool: one thread per output element; returns the matching template. */
static const char *k_pool(MtlKernel *k) {
  PoolGeom p = emit_pool_geom(k->g, k->n);
  emit_pool_vars(&k->v, &p);
  grid_1d(k, node_numel(k->n));
  if (k->n->op == OP_MAXPOOL2D) return "metal/maxpool.metal.tmpl";
  emit_var(&k->v, "COUNT_PAD", p.count_pad ? "true" : "false");
  return "metal/avgpool.metal.tmpl";
}

/* ---- reductions and normalisations ---- */

/* text with every line indented two more spaces. */
static char *indent(const char *text) {
  Buf b = {0};
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
    buf_puts(&b, "  ");
    buf_put(&b, p, len);
    p += len;
  }
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* Reduce: one thread per output when reduced runs are short, else one threadgroup
 * per output reducing in shared memory; sets kept/reduced walk offsets and the op. */
static const char *k_reduce(MtlKernel *k) {
  ReduceGeom r = emit_reduce_geom(k->g, k->n);
  static const char *const bname[] = {"base"}, *const rname[] = {"roff"};
  emit_var(&k->v, "BASE", index_code("o", &r.kept, bname));
  emit_var(&k->v, "ROFF", indent(index_code("r", &r.reduced, rname)));   /* in the loop body */
  emit_vari(&k->v, "RED", r.red);
  emit_vari(&k->v, "OUTN", r.outn);
  EmitReduceOp op = emit_reduce_op(k->n->op, "isnan(v)");
  emit_var(&k->v, "INIT", op.init);
  emit_var(&k->v, "UPDATE", op.update);
  emit_var(&k->v, "FINISH", op.finish);
  emit_var(&k->v, "TG_REDUCE", k->n->op == OP_REDUCE_MAX ? "kiln_tg_max" : "kiln_tg_sum");
  /* min and prod have no threadgroup helper in the prologue (kiln_tg_sum/max only):
   * one thread per output walks all RED elements, in order (NaN kept, exact order). */
  bool thread_only = k->n->op == OP_REDUCE_MIN || k->n->op == OP_REDUCE_PROD;
  if (r.red <= 16 || thread_only) {
    grid_1d(k, r.outn);
    return "metal/reduce_thread.metal.tmpl";
  }
  int64_t t = line_threads(r.red);
  emit_vari(&k->v, "T", t);
  grid(k, r.outn, 1, 1, t, 1);
  return "metal/reduce.metal.tmpl";
}

/* Softmax: one threadgroup per line along the axis (OUTER*INNER lines of N). */
static const char *k_softmax(MtlKernel *k) {
  AxisGeom a = emit_axis_geom(&k->n->shape, k->n->a.axis);
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "INNER", a.inner);
  emit_vari(&k->v, "T", line_threads(a.n));
  grid(k, a.outer * a.inner, 1, 1, line_threads(a.n), 1);
  return "metal/softmax.metal.tmpl";
}

/* LayerNorm / RMSNorm: one threadgroup per row of d elements, optional gamma/beta. */
static const char *k_norm(MtlKernel *k) {
  NormGeom g = emit_norm_geom(k->g, k->n);
  emit_vari(&k->v, "D", g.d);
  emit_vari(&k->v, "T", line_threads(g.d));
  emit_var(&k->v, "EPS", emit_float(k->n->a.eps));
  if (g.gamma) k->opname[1] = "gamma";
  if (g.beta) k->opname[2] = "beta";
  emit_var(&k->v, "AFFINE", g.affine);
  emit_var(&k->v, "AFFINE_DOC", g.affine_doc);
  grid(k, g.rows, 1, 1, line_threads(g.d), 1);
  return k->n->op == OP_LAYERNORM ? "metal/layernorm.metal.tmpl" : "metal/rmsnorm.metal.tmpl";
}

/* BatchNorm (inference): one thread per output element reading the per-channel stats. */
static const char *k_batchnorm(MtlKernel *k) {
  AxisGeom a = emit_axis_geom(&k->n->shape, 1);   /* N x C x PLANE */
  static const char *const names[] = {"x", "mean", "var", "gamma", "beta"};
  for (int i = 0; i < 5; i++) k->opname[i] = names[i];
  emit_vari(&k->v, "C", a.n);
  emit_vari(&k->v, "PLANE", a.inner);
  emit_var(&k->v, "EPS", emit_float(k->n->a.eps));
  emit_vari(&k->v, "N", node_numel(k->n));
  grid_1d(k, node_numel(k->n));
  return "metal/batchnorm.metal.tmpl";
}

/* ---- data movement ---- */

/* A strided read (transpose, slice): one thread per output element. */
static const char *k_copy(MtlKernel *k) {
  EmitWalk w = emit_copy_walk(k->g, k->n);
  static const char *const onames[] = {NULL, "xo"};
  emit_var(&k->v, "INDEX", index_code("i", &w, onames));
  emit_vari(&k->v, "N", node_numel(k->n));
  emit_var(&k->v, "WHAT", k->n->op == OP_TRANSPOSE ? " (permuted)" : " times the steps");
  grid_1d(k, node_numel(k->n));
  return "metal/copy.metal.tmpl";
}

/* Concat: one thread per output element, choosing its input by offset in the row. */
static const char *k_concat(MtlKernel *k) {
  ConcatGeom c = emit_concat_geom(k->g, k->n);
  Buf parts = {0};
  for (int i = 0; i < c.nparts; i++) {
    k->opname[i] = kiln_fmt("x%d", i);
    EmitVars p = {0};
    emit_var(&p, "K", kiln_fmt("%d", i));
    emit_var(&p, "ELSE", i ? "else " : "");
    emit_vari(&p, "LEN", c.len[i]);
    emit_vari(&p, "AT", c.at[i]);
    emit_vari(&p, "END", c.at[i] + c.len[i]);
    emit_var(&p, "EPILOGUE", emit_hook_epilogue);
    template_expand(&parts, template_get("metal/concat_part.metal.tmpl"), p.kv);
  }
  emit_vari(&k->v, "ROW", c.row);
  emit_vari(&k->v, "N", node_numel(k->n));
  emit_var(&k->v, "PARTS", kiln_strdup(parts.data));
  buf_free(&parts);
  grid_1d(k, node_numel(k->n));
  return "metal/concat.metal.tmpl";
}

/* Gather: one thread per output element; index range checking is the template's job. */
static const char *k_gather(MtlKernel *k) {
  GatherGeom g = emit_gather_geom(k->g, k->n);
  k->opname[1] = "idx";
  if (mtl_stored(in(k, 0))) {   /* pass_quant: a table read by rows, so axis 0 of a matrix */
    if (g.outer != 1) die("Metal: %s gathers stored weight %s along an inner axis", k->name, in(k, 0)->name);
    stored_vars(k, in(k, 0));
    emit_vari(&k->v, "N", g.n);
    emit_vari(&k->v, "INNER", g.inner);
    emit_vari(&k->v, "TOTAL", node_numel(k->n));
    grid_1d(k, node_numel(k->n));
    return "metal/gather_q.metal.tmpl";
  }
  emit_vari(&k->v, "N", g.n);
  emit_vari(&k->v, "INNER", g.inner);
  emit_vari(&k->v, "NIDX", g.nidx);
  emit_vari(&k->v, "TOTAL", node_numel(k->n));
  grid_1d(k, node_numel(k->n));
  return "metal/gather.metal.tmpl";
}

/* Argmax/argmin: one thread per (outer, inner) line of N elements along the axis. */
static const char *k_argreduce(MtlKernel *k) {
  AxisGeom a = emit_axis_geom(&in(k, 0)->shape, k->n->a.axis);
  bool max = k->n->op == OP_ARGMAX;
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "INNER", a.inner);
  emit_vari(&k->v, "TOTAL", a.outer * a.inner);
  emit_var(&k->v, "CMP", max ? ">" : "<");
  emit_var(&k->v, "WHAT", max ? "largest" : "smallest");
  grid_1d(k, a.outer * a.inner);
  return "metal/argreduce.metal.tmpl";
}

/* gather_elements: one thread per output element. */
static const char *k_gather_elements(MtlKernel *k) {
  AxisGeom x = emit_axis_geom(&in(k, 0)->shape, k->n->a.axis);
  k->opname[1] = "idx";
  emit_vari(&k->v, "N", x.n);
  emit_vari(&k->v, "NI", k->n->shape.dim[k->n->a.axis]);
  emit_vari(&k->v, "INNER", x.inner);
  emit_vari(&k->v, "TOTAL", node_numel(k->n));
  grid_1d(k, node_numel(k->n));
  return "metal/gather_elements.metal.tmpl";
}

/* topk: one thread per element of x, each finding its rank in its line (O(N) work a
 * thread, no shared memory, no barrier); BEFORE: v strictly before w, AFTER: w
 * strictly before v. */
static const char *k_topk(MtlKernel *k) {
  AxisGeom a = emit_axis_geom(&in(k, 0)->shape, k->n->a.axis);
  bool largest = k->n->a.largest;
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "INNER", a.inner);
  emit_vari(&k->v, "K", k->n->a.k);
  emit_vari(&k->v, "TOTAL", a.outer * a.n * a.inner);
  emit_var(&k->v, "WHICH", largest ? "largest" : "smallest");
  emit_var(&k->v, "ORDER", largest ? "descending" : "ascending");
  emit_var(&k->v, "BEFORE", emit_topk_before(largest, "v", "w", "isnan(v)", "isnan(w)"));
  emit_var(&k->v, "AFTER", emit_topk_before(largest, "w", "v", "isnan(w)", "isnan(v)"));
  grid_1d(k, a.outer * a.n * a.inner);
  return "metal/topk.metal.tmpl";
}

/* conv_transpose2d: one thread per output element, gathering its taps. */
static const char *k_conv_transpose(MtlKernel *k) {
  bool bias = k->n->nin == 3;
  emit_conv_transpose_vars(&k->v, k->g, k->n);
  k->opname[1] = "w";
  if (bias) k->opname[2] = "bias";
  emit_var(&k->v, "BIAS_INIT", bias ? "bias[oc]" : "0.0f");
  emit_vari(&k->v, "TOTAL", node_numel(k->n));
  grid_1d(k, node_numel(k->n));
  return "metal/conv_transpose.metal.tmpl";
}

/* scatter / index_copy: one thread per output element, searching the indices of its
 * line for the last that targets it (no two threads write one element: no race). */
static const char *k_scatter(MtlKernel *k) {
  AxisGeom x = emit_axis_geom(&in(k, 0)->shape, k->n->a.axis);
  bool sc = k->n->op == OP_SCATTER;
  k->opname[1] = "idx";
  k->opname[2] = "src";
  emit_var(&k->v, "T", mtl_type(k->n->dtype));
  emit_vari(&k->v, "N", x.n);
  emit_vari(&k->v, "NI", in(k, 2)->shape.dim[k->n->a.axis]);
  emit_vari(&k->v, "INNER", x.inner);
  emit_vari(&k->v, "TOTAL", node_numel(k->n));
  emit_var(&k->v, "IDX_AT", sc ? "at" : "j");
  emit_var(&k->v, "WHAT", sc ? "scatter: idx has src's shape" : "index_copy: idx is a vector of NI");
  grid_1d(k, node_numel(k->n));
  return "metal/scatter.metal.tmpl";
}

/* Attention family: one thread per (head, query row); the sizes of q [HQ, T, D] and
 * k/v [HKV, S, D], GROUP = HQ / HKV, the scale literal, CAUSAL and WINDOW (0: none). */
static const char *k_attention(MtlKernel *k) {
  static const char *const names[] = {"q", "k", "v", "len", "pos"};
  for (int i = 0; i < 5; i++) k->opname[i] = names[i];
  const Shape *q = &in(k, 0)->shape, *kv = &in(k, 1)->shape;
  emit_vari(&k->v, "HQ", q->dim[0]);
  emit_vari(&k->v, "T", q->dim[1]);
  emit_vari(&k->v, "D", q->dim[2]);
  emit_vari(&k->v, "S", kv->dim[1]);
  emit_vari(&k->v, "GROUP", q->dim[0] / kv->dim[0]);
  emit_var(&k->v, "CAUSAL", k->n->a.causal ? "true" : "false");
  emit_vari(&k->v, "WINDOW", k->n->a.window);
  emit_var(&k->v, "SCALE", emit_float(k->n->a.scale));
  grid_1d(k, q->dim[0] * q->dim[1]);
  return "metal/sdpa.metal.tmpl";
}

/* Write: one thread per element of the value, stored at the run-time row offset. The
 * state version it updates (operand 0) is not bound: the result, `out`, is the same
 * bytes of the state block, written in place; x and at are the operands. */
static const char *k_write(MtlKernel *k) {
  AxisGeom a = emit_axis_geom(&k->n->shape, k->n->a.axis);
  Node *x = in(k, 1);
  k->op[0] = x, k->opname[0] = "x";
  k->op[1] = in(k, 2), k->opname[1] = "at";
  k->nops = 2;
  emit_var(&k->v, "STATE", esc_comment(k->g->prog ? k->g->prog->states[k->n->a.state].name : "?"));
  emit_vari(&k->v, "N", a.n);
  emit_vari(&k->v, "ROWS", x->shape.dim[k->n->a.axis]);
  emit_vari(&k->v, "INNER", a.inner);
  emit_vari(&k->v, "TOTAL", node_numel(x));
  grid_1d(k, node_numel(x));
  return k->n->a.ring ? "metal/write_ring.metal.tmpl" : "metal/write.metal.tmpl";
}

typedef const char *RenderFn(MtlKernel *k);
static RenderFn *const render[FAM__COUNT] = {
    [FAM_UNARY] = k_elementwise,   [FAM_BINARY] = k_elementwise, [FAM_SELECT] = k_elementwise,
    [FAM_CAST] = k_elementwise,    [FAM_MATMUL] = k_matmul,      [FAM_CONV] = k_conv,
    [FAM_POOL] = k_pool,           [FAM_REDUCE] = k_reduce,      [FAM_SOFTMAX] = k_softmax,
    [FAM_NORM] = k_norm,           [FAM_BATCHNORM] = k_batchnorm, [FAM_TRANSPOSE] = k_copy,
    [FAM_CONCAT] = k_concat,       [FAM_SLICE] = k_copy,         [FAM_GATHER] = k_gather,
    [FAM_ATTENTION] = k_attention, [FAM_WRITE] = k_write,
    [FAM_ARGREDUCE] = k_argreduce, [FAM_GATHER_ELEMENTS] = k_gather_elements, [FAM_TOPK] = k_topk,
    [FAM_CONV_TRANSPOSE] = k_conv_transpose, [FAM_SCATTER] = k_scatter,
};

/* Fills k's variables and grid for its anchor's family and returns the template;
 * dies on a family without one, user error past 2^31 elements. */
const char *mtl_render(MtlKernel *k) {
  RenderFn *fn = render[kiln_ops[k->n->op].family];
  if (!fn) die("Metal: no kernel template for op %s", kiln_ops[k->n->op].name);
  if (node_numel(k->n) > INT_MAX) kiln_error_at(k->n->loc, "Metal target: %s has more than 2^31 elements", k->name);
  return fn(k);
}
