/*
 * emit_c.c — the C target: <m>.h, <m>.c, <m>.weights (and <m>_weights.c).
 *
 * Planned graph in (kernels scheduled, every value placed by pass_memplan), files
 * out. Every line of C comes from a template under templates/c/: this file only
 * computes the values the templates name (shapes, strides, offsets, identifiers,
 * rendered op expressions). One render function per OpFamily fills a small table
 * of template variables; the family table at the bottom picks it, so a new family
 * is one function, one row and one template. A fused kernel is rendered by its
 * anchor's family; its chain becomes an inline `<kernel>_epilogue` helper called at
 * the template's $EPILOGUE hooks (emit_common.c), its extra operands parameters
 * e0, e1... after the anchor's.
 *
 * Names: kernels are Kernel.cname (made unique by pass_group); weights get
 * W_<NAME> and arena values A_<KERNEL> byte-offset constants; inputs and outputs
 * keep their Lua names as parameters. Anything that could collide with C or with
 * the generated code's own identifiers gets a trailing '_' until it is unique.
 */
#include "kiln.h"

#include <limits.h>
#include <string.h>

/* ---- template variables ---- */

enum { MAX_VARS = 48 };

/* A growing list of (name, value) pairs for template_expand, NULL-terminated. */
typedef struct {
  const char *kv[2 * MAX_VARS + 1];
  int n;
} Vars;

static void var(Vars *v, const char *name, const char *value) {
  if (v->n == MAX_VARS) die("too many template variables");
  v->kv[2 * v->n] = name;
  v->kv[2 * v->n + 1] = value;
  v->n++;
  v->kv[2 * v->n] = NULL;
}

static void vari(Vars *v, const char *name, int64_t value) {
  if (value > INT_MAX || value < INT_MIN)
    kiln_error("C target: constant %s = %lld does not fit a C int (tensor too large)", name, (long long)value);
  var(v, name, kiln_fmt("%lld", (long long)value));
}

static void expand(Buf *out, const char *tmpl, const Vars *v) { template_expand(out, template_get(tmpl), v->kv); }

static char *expand_str(const char *tmpl, const Vars *v) {
  Buf b = {0};
  expand(&b, tmpl, v);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

/* ---- names ---- */

/* Identifiers the generated C file itself uses at file scope or in the run function,
 * besides C keywords: a kernel or parameter of this name would clash. */
static bool reserved_ident(const char *s) {
  static const char *const own[] = {
      "w", "a", "weights", "arena", "inputs", "outputs", "exp", "expf", "log", "logf", "sqrt", "sqrtf",
      "tanh", "tanhf", "erf", "erff", "fabs", "fabsf", "fmax", "fmaxf", "fmin", "fminf", "pow", "powf",
      "INFINITY", "NAN", "INT32_MAX", "INT32_MIN", "abs", "floor", "ceil", "round", "sin", "cos", "max",
      "min", NULL};
  for (int i = 0; own[i]; i++)
    if (strcmp(own[i], s) == 0) return true;
  return emit_is_c_keyword(s);
}

/* A set of names handed out so far, to keep generated identifiers unique. */
typedef struct {
  const char **v;
  int n, cap;
} Names;

static bool names_has(const Names *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->v[i], name) == 0) return true;
  return false;
}

/* Returns base, or base with '_' appended until it is neither taken nor reserved. */
static const char *names_claim(Names *s, const char *base) {
  const char *name = base;
  while (names_has(s, name) || reserved_ident(name)) name = kiln_fmt("%s_", name);
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 64;
    const char **v = kiln_alloc(sizeof(char *) * (size_t)s->cap);
    if (s->n) memcpy(v, s->v, sizeof(char *) * (size_t)s->n);
    s->v = v;
  }
  s->v[s->n++] = name;
  return name;
}

/* Everything the emitter decides once per model. */
typedef struct {
  Graph *g;
  const char *model, *upper;      /* "mlp", "MLP" */
  const char **kname;             /* per kernel: function name */
  const char **ename;             /* per kernel: its epilogue helper's name (fused kernels) */
  const char **wname;             /* per node id: W_ constant of a weights-region root */
  const char **aname;             /* per node id: A_ constant of an arena-region root */
  const char **in_param, **out_param;   /* per graph input/output: parameter name */
  const char **in_stem, **out_stem;     /* per graph input/output: macro stem */
} Ctx;

static Node *node(Graph *g, int id) { return graph_node(g, id); }
static Node *input(Graph *g, const Node *n, int i) { return graph_node(g, n->in[i]); }

/* The node that owns the bytes a value lives in: RESHAPE views are followed down. */
static Node *storage_root(Graph *g, Node *n) {
  while (n->op == OP_RESHAPE) n = input(g, n, 0);
  return n;
}

/* A comment-safe copy of s: no "*" "/" pair can close the comment early. */
static const char *comment_safe(const char *s) {
  if (!strstr(s, "*/")) return s;
  char *c = kiln_strdup(s);
  for (char *p = c; (p = strstr(p, "*/"));) p[1] = '|';
  return c;
}

/* Names every kernel, weight, arena value and I/O parameter, uniquely. The I/O
 * parameters claim their names first: they appear in the public header, while a
 * kernel's name is private to m.c (a clash renames the kernel). */
static void ctx_init(Ctx *c, Graph *g) {
  c->g = g;
  c->model = g->model;
  c->upper = emit_upper(g->model);
  Names ids = {0}, stems = {0};
  names_claim(&ids, kiln_fmt("%s_run", g->model));
  names_claim(&ids, kiln_fmt("%s_run_v", g->model));
  c->in_param = kiln_alloc(sizeof(char *) * (size_t)(g->ninputs + 1));
  c->out_param = kiln_alloc(sizeof(char *) * (size_t)(g->noutputs + 1));
  c->in_stem = kiln_alloc(sizeof(char *) * (size_t)(g->ninputs + 1));
  c->out_stem = kiln_alloc(sizeof(char *) * (size_t)(g->noutputs + 1));
  static const char *const macro_reserved[] = {"WEIGHTS", "ARENA", "WEIGHTS_FILE", NULL};
  for (int i = 0; macro_reserved[i]; i++) names_claim(&stems, macro_reserved[i]);
  for (int i = 0; i < g->ninputs; i++) {
    c->in_param[i] = names_claim(&ids, emit_ident(g->inputs[i].name));
    c->in_stem[i] = names_claim(&stems, emit_upper(emit_ident(g->inputs[i].name)));
  }
  for (int i = 0; i < g->noutputs; i++) {
    c->out_param[i] = names_claim(&ids, emit_ident(g->outputs[i].name));
    c->out_stem[i] = names_claim(&stems, emit_upper(emit_ident(g->outputs[i].name)));
  }
  c->kname = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++) c->kname[k] = names_claim(&ids, emit_ident(g->kernels[k].cname));
  c->ename = kiln_alloc(sizeof(char *) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++)
    if (g->kernels[k].nnodes > 1) c->ename[k] = names_claim(&ids, kiln_fmt("%s_epilogue", c->kname[k]));
  c->wname = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  c->aname = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->op == OP_RESHAPE) continue;
    if (n->region == REG_WEIGHTS) {
      const char *base = n->name && *n->name ? n->name : kiln_fmt("%s_%d", kiln_ops[n->op].name, n->id);
      c->wname[i] = names_claim(&ids, kiln_fmt("W_%s", emit_upper(emit_ident(base))));
    }
  }
  for (int k = 0; k < g->nkernels; k++) {
    const Kernel *kr = &g->kernels[k];
    Node *n = node(g, kr->nodes[kr->nnodes - 1]);
    if (n->region == REG_ARENA) c->aname[n->id] = names_claim(&ids, kiln_fmt("A_%s", emit_upper(c->kname[k])));
  }
}

/* ---- binding operands in the run function ---- */

/* The pointer expression for value n inside the run function, typed for a kernel
 * parameter (const when read). */
static const char *operand_ptr(const Ctx *c, Node *n, bool write) {
  Node *r = storage_root(c->g, n);
  const char *t = emit_c_type(n->dtype), *cq = write ? "" : "const ";
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
    if (n->offset) return kiln_fmt("(const %s *)((const unsigned char *)%s + %lld)", t, c->in_param[n->io_slot], (long long)n->offset);
    return c->in_param[n->io_slot];
  case REG_OUTPUT:
    if (n->offset) return kiln_fmt("(%s%s *)((unsigned char *)%s + %lld)", cq, t, c->out_param[n->io_slot], (long long)n->offset);
    return c->out_param[n->io_slot];
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
  Vars v;          /* NAME, DESC, LOC already set */
} KernelCtx;

#define IN(i) input(k->g, k->n, (i))

static char *shape_of(const Node *n) { return shape_str(&n->shape); }

/* The attributes that shape a kernel, as a reader wants them in its comment. */
static void describe_attrs(Buf *b, const Node *n) {
  const Attrs *a = &n->a;
  switch (kiln_ops[n->op].family) {
  case FAM_MATMUL:
    if (a->trans_x || a->trans_y) buf_printf(b, ", transposed:%s%s", a->trans_x ? " x" : "", a->trans_y ? " y" : "");
    break;
  case FAM_CONV:
    buf_printf(b, ", stride %d,%d pad %d,%d,%d,%d dilation %d,%d groups %d", a->stride[0], a->stride[1], a->pad[0], a->pad[1],
               a->pad[2], a->pad[3], a->dilation[0], a->dilation[1], a->groups);
    break;
  case FAM_POOL:
    buf_printf(b, ", kernel %d,%d stride %d,%d pad %d,%d,%d,%d%s", a->kernel[0], a->kernel[1], a->stride[0], a->stride[1],
               a->pad[0], a->pad[1], a->pad[2], a->pad[3], n->op == OP_AVGPOOL2D && a->count_pad ? " count_pad" : "");
    break;
  case FAM_REDUCE: buf_printf(b, ", axes mask 0x%x%s", a->axes, a->keepdims ? " keepdims" : ""); break;
  case FAM_SOFTMAX: case FAM_CONCAT: case FAM_GATHER: case FAM_NORM: buf_printf(b, ", axis %d", a->axis); break;
  case FAM_TRANSPOSE:
    buf_puts(b, ", perm");
    for (int i = 0; i < n->shape.rank; i++) buf_printf(b, "%s%d", i ? "," : " ", a->perm[i]);
    break;
  default: break;
  }
}

/* "matmul f32 [2, 3], [3, 4] -> [2, 4]" plus the attributes that matter. */
static char *describe(Graph *g, const Node *n) {
  Buf b = {0};
  buf_printf(&b, "%s %s ", kiln_ops[n->op].name, dtype_name(n->dtype));
  for (int i = 0; i < n->nin; i++) buf_printf(&b, "%s%s", i ? ", " : "", shape_of(input(g, n, i)));
  buf_printf(&b, " -> %s", shape_of(n));
  describe_attrs(&b, n);
  char *s = kiln_strdup(b.data);
  buf_free(&b);
  return s;
}

/* Loop structure of an elementwise kernel: the output as ROWS rows of INNER, each
 * operand's start from the row index over the outer dims; inner strides separate. */
typedef struct {
  int rank;                        /* outer rank, >= 1 (padded with a size-1 dim) */
  int64_t dims[KILN_MAX_RANK];
  int64_t strides[4][KILN_MAX_RANK];
  int64_t rows, inner, inner_stride[4];
} Loops;

/* strides[k] for k < nops are element strides over out's dims, as from
 * emit_bcast_strides; coalesces them and splits off the innermost dim. */
static Loops loops_make(const Shape *out, int nops, int64_t strides[][KILN_MAX_RANK]) {
  Loops l = {0};
  int r;
  int64_t dims[KILN_MAX_RANK];
  emit_coalesce(out, nops, strides, &r, dims);
  l.inner = dims[r - 1];
  for (int k = 0; k < nops; k++) l.inner_stride[k] = strides[k][r - 1];
  l.rank = r - 1;
  l.rows = 1;
  for (int i = 0; i < l.rank; i++) {
    l.dims[i] = dims[i];
    l.rows *= dims[i];
    for (int k = 0; k < nops; k++) l.strides[k][i] = strides[k][i];
  }
  if (l.rank == 0) {
    l.rank = 1;
    l.dims[0] = 1;
    for (int k = 0; k < nops; k++) l.strides[k][0] = 0;
  }
  return l;
}

static void loops_vars(KernelCtx *k, const Loops *l, const char *const *stride_names, int nops) {
  vari(&k->v, "ROWS", l->rows);
  vari(&k->v, "INNER", l->inner);
  vari(&k->v, "RANK", l->rank);
  var(&k->v, "DIMS", emit_int_list(l->dims, l->rank));
  for (int i = 0; i < nops; i++)
    if (stride_names[i]) var(&k->v, stride_names[i], emit_int_list(l->strides[i], l->rank));
}

/* "x[xo + j]" for an operand walked contiguously in the inner loop, "x[xo]" when
 * broadcast along it. */
static const char *inner_operand(const char *arr, const char *start, int64_t stride) {
  if (stride == 0) return kiln_fmt("%s[%s]", arr, start);
  if (stride == 1) return kiln_fmt("%s[%s + j]", arr, start);
  die("C: inner stride %lld of %s is neither 0 nor 1 after coalescing", (long long)stride, arr);
}

static const char *k_unary(KernelCtx *k) {
  const char *ops[] = {"x[i]"};
  var(&k->v, "TX", emit_c_type(IN(0)->dtype));
  var(&k->v, "T", emit_c_type(k->n->dtype));
  vari(&k->v, "N", node_numel(k->n));
  var(&k->v, "EXPR", emit_expr(kiln_ops[k->n->op].expr, emit_c_fns, ops, 1));
  return "c/unary.c.tmpl";
}

static const char *k_binary(KernelCtx *k) {
  int64_t st[3][KILN_MAX_RANK];
  emit_strides(&k->n->shape, st[0]);
  emit_bcast_strides(&IN(0)->shape, &k->n->shape, st[1]);
  emit_bcast_strides(&IN(1)->shape, &k->n->shape, st[2]);
  Loops l = loops_make(&k->n->shape, 3, st);
  var(&k->v, "T", emit_c_type(k->n->dtype));
  const char *expr = kiln_ops[k->n->op].expr;
  if (l.rows == 1) {   /* contiguous or scalar operands: one flat loop */
    const char *ops[] = {l.inner_stride[1] ? "x[i]" : "x[0]", l.inner_stride[2] ? "y[i]" : "y[0]"};
    vari(&k->v, "N", l.inner);
    var(&k->v, "EXPR", emit_expr(expr, emit_c_fns, ops, 2));
    return "c/binary.c.tmpl";
  }
  const char *names[] = {NULL, "XSTRIDES", "YSTRIDES"};
  loops_vars(k, &l, names, 3);
  const char *ops[] = {inner_operand("x", "xo", l.inner_stride[1]), inner_operand("y", "yo", l.inner_stride[2])};
  var(&k->v, "EXPR", emit_expr(expr, emit_c_fns, ops, 2));
  if (l.rank > 1) return "c/binary_bcast.c.tmpl";
  vari(&k->v, "X_ROW", l.strides[1][0]);   /* one outer dim: rows (bias adds, row scales) */
  vari(&k->v, "Y_ROW", l.strides[2][0]);
  return "c/binary_rows.c.tmpl";
}

static const char *k_select(KernelCtx *k) {
  int64_t st[4][KILN_MAX_RANK];
  emit_strides(&k->n->shape, st[0]);
  for (int i = 0; i < 3; i++) emit_bcast_strides(&IN(i)->shape, &k->n->shape, st[i + 1]);
  Loops l = loops_make(&k->n->shape, 4, st);
  const char *names[] = {NULL, "XSTRIDES", "YSTRIDES", "ZSTRIDES"};
  loops_vars(k, &l, names, 4);
  var(&k->v, "T", emit_c_type(k->n->dtype));
  const char *ops[] = {inner_operand("x", "xo", l.inner_stride[1]), inner_operand("y", "yo", l.inner_stride[2]),
                       inner_operand("z", "zo", l.inner_stride[3])};
  var(&k->v, "EXPR", emit_expr(kiln_ops[k->n->op].expr, emit_c_fns, ops, 3));
  return "c/select.c.tmpl";
}

/* The conversion of x (an identifier or element) between dtypes, as the interpreter
 * defines it: f32 -> i32 truncates toward zero (NaN -> 0, saturating), anything ->
 * bool is x != 0. */
static const char *cast_expr(DType from, DType to, const char *x) {
  if (from == to) return x;
  if (to == DT_BOOL) return kiln_fmt("(uint8_t)(%s != 0)", x);
  if (to == DT_F32) return kiln_fmt("(float)%s", x);
  if (from == DT_F32)
    return kiln_fmt("(%s != %s ? 0 : %s >= 2147483648.0f ? INT32_MAX : %s <= -2147483648.0f ? INT32_MIN : (int32_t)%s)", x,
                    x, x, x, x);
  return kiln_fmt("(int32_t)%s", x);
}

static const char *k_cast(KernelCtx *k) {
  var(&k->v, "TX", emit_c_type(IN(0)->dtype));
  var(&k->v, "T", emit_c_type(k->n->dtype));
  vari(&k->v, "N", node_numel(k->n));
  var(&k->v, "CONVERT", cast_expr(IN(0)->dtype, k->n->dtype, "x[i]"));
  return "c/cast.c.tmpl";
}

static Shape batch_of(const Shape *s) {
  Shape b = *s;
  b.rank -= 2;
  return b;
}

static const char *k_matmul(KernelCtx *k) {
  const Node *x = IN(0), *y = IN(1), *n = k->n;
  const Attrs *a = &n->a;
  int64_t m = n->shape.dim[n->shape.rank - 2], nn = n->shape.dim[n->shape.rank - 1];
  int64_t kk = a->trans_x ? x->shape.dim[x->shape.rank - 2] : x->shape.dim[x->shape.rank - 1];
  Shape bo = batch_of(&n->shape), bx = batch_of(&x->shape), by = batch_of(&y->shape);
  int64_t st[3][KILN_MAX_RANK];
  emit_strides(&bo, st[0]);
  emit_bcast_strides(&bx, &bo, st[1]);
  emit_bcast_strides(&by, &bo, st[2]);
  for (int i = 0; i < bo.rank; i++) {
    st[1][i] *= m * kk;
    st[2][i] *= kk * nn;
  }
  int r;
  int64_t dims[KILN_MAX_RANK];
  emit_coalesce(&bo, 3, st, &r, dims);
  vari(&k->v, "M", m);
  vari(&k->v, "N", nn);
  vari(&k->v, "K", kk);
  vari(&k->v, "BATCH", shape_numel(&bo));
  vari(&k->v, "RANK", r);
  var(&k->v, "DIMS", emit_int_list(dims, r));
  var(&k->v, "XSTRIDES", emit_int_list(st[1], r));
  var(&k->v, "YSTRIDES", emit_int_list(st[2], r));
  bool batched = shape_numel(&bo) > 1;   /* else the batch loop is noise to a reader */
  if (a->trans_y && !a->trans_x) return batched ? "c/matmul_nt_batched.c.tmpl" : "c/matmul_nt.c.tmpl";
  vari(&k->v, "XS_M", a->trans_x ? 1 : kk);
  vari(&k->v, "XS_K", a->trans_x ? m : 1);
  vari(&k->v, "YS_K", a->trans_y ? 1 : nn);
  vari(&k->v, "YS_N", a->trans_y ? kk : 1);
  return batched ? "c/matmul_batched.c.tmpl" : "c/matmul.c.tmpl";
}

static const char *k_conv(KernelCtx *k) {
  const Shape *x = &IN(0)->shape, *w = &IN(1)->shape, *o = &k->n->shape;
  const Attrs *a = &k->n->a;
  const char *names[] = {"NB", "C", "H", "W"};
  for (int i = 0; i < 4; i++) vari(&k->v, names[i], x->dim[i]);
  vari(&k->v, "OC", o->dim[1]);
  vari(&k->v, "OH", o->dim[2]);
  vari(&k->v, "OW", o->dim[3]);
  vari(&k->v, "KH", w->dim[2]);
  vari(&k->v, "KW", w->dim[3]);
  vari(&k->v, "GROUPS", a->groups);
  vari(&k->v, "CG", x->dim[1] / a->groups);
  vari(&k->v, "OCG", o->dim[1] / a->groups);
  vari(&k->v, "SH", a->stride[0]);
  vari(&k->v, "SW", a->stride[1]);
  vari(&k->v, "PT", a->pad[0]);
  vari(&k->v, "PL", a->pad[1]);
  vari(&k->v, "DH", a->dilation[0]);
  vari(&k->v, "DW", a->dilation[1]);
  bool bias = k->n->nin == 3;
  var(&k->v, "BIAS_PARAM", bias ? ", const float *restrict bias" : "");
  var(&k->v, "BIAS_LOOP", bias ? "\n      for (int64_t i = 0; i < OH * OW; i++) o[i] += bias[oc];" : "");
  return "c/conv.c.tmpl";
}

static const char *k_pool(KernelCtx *k) {
  const Shape *x = &IN(0)->shape, *o = &k->n->shape;
  const Attrs *a = &k->n->a;
  vari(&k->v, "PLANES", x->dim[0] * x->dim[1]);
  vari(&k->v, "H", x->dim[2]);
  vari(&k->v, "W", x->dim[3]);
  vari(&k->v, "OH", o->dim[2]);
  vari(&k->v, "OW", o->dim[3]);
  vari(&k->v, "KH", a->kernel[0]);
  vari(&k->v, "KW", a->kernel[1]);
  vari(&k->v, "SH", a->stride[0]);
  vari(&k->v, "SW", a->stride[1]);
  vari(&k->v, "PT", a->pad[0]);
  vari(&k->v, "PL", a->pad[1]);
  if (k->n->op == OP_MAXPOOL2D) return "c/maxpool.c.tmpl";
  vari(&k->v, "COUNT_PAD", a->count_pad);
  return "c/avgpool.c.tmpl";
}

/* Splits x's dims into those kept and those reduced (coalesced), for the reduce template. */
static const char *k_reduce(KernelCtx *k) {
  const Shape *x = &IN(0)->shape;
  int64_t xs[KILN_MAX_RANK];
  emit_strides(x, xs);
  Shape ks = {0}, rs = {0};
  int64_t kst[1][KILN_MAX_RANK], rst[1][KILN_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    bool red = k->n->a.axes >> i & 1u;
    Shape *s = red ? &rs : &ks;
    (red ? rst : kst)[0][s->rank] = xs[i];
    s->dim[s->rank++] = x->dim[i];
  }
  int kr, rr;
  int64_t kd[KILN_MAX_RANK], rd[KILN_MAX_RANK];
  emit_coalesce(&ks, 1, kst, &kr, kd);
  emit_coalesce(&rs, 1, rst, &rr, rd);
  int64_t inner = rd[rr - 1], inner_stride = rst[0][rr - 1], rows = 1;
  rr--;
  for (int i = 0; i < rr; i++) rows *= rd[i];
  if (rr == 0) {
    rr = 1;
    rd[0] = 1;
    rst[0][0] = 0;
  }
  vari(&k->v, "OUTN", node_numel(k->n));
  vari(&k->v, "RED", shape_numel(&rs));
  vari(&k->v, "ROWS", rows);
  vari(&k->v, "INNER", inner);
  vari(&k->v, "INNER_STRIDE", inner_stride);
  vari(&k->v, "KRANK", kr);
  vari(&k->v, "RRANK", rr);
  var(&k->v, "KDIMS", emit_int_list(kd, kr));
  var(&k->v, "KSTRIDES", emit_int_list(kst[0], kr));
  var(&k->v, "RDIMS", emit_int_list(rd, rr));
  var(&k->v, "RSTRIDES", emit_int_list(rst[0], rr));
  /* init, update (v is the element), result: per op, as the interpreter defines them */
  static const char *const sum[] = {"0.0f", "acc += v", "acc"};
  static const char *const mean[] = {"0.0f", "acc += v", "acc / (float)RED"};
  static const char *const max[] = {"-INFINITY", "acc = v > acc || v != v ? v : acc", "acc"};
  const char *const *f = k->n->op == OP_REDUCE_SUM ? sum : k->n->op == OP_REDUCE_MEAN ? mean : max;
  var(&k->v, "INIT", f[0]);
  var(&k->v, "UPDATE", f[1]);
  var(&k->v, "FINISH", f[2]);
  /* Trailing contiguous dims reduced (sum over the last dim, a global mean): rows. */
  bool rows_form = rows == 1 && inner_stride == 1 && kr == 1 && (kd[0] == 1 || kst[0][0] == inner);
  return rows_form ? "c/reduce_rows.c.tmpl" : "c/reduce.c.tmpl";
}

static int64_t prod(const Shape *s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= s->dim[i];
  return p;
}

static int norm_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

static const char *k_softmax(KernelCtx *k) {
  const Shape *s = &k->n->shape;
  int ax = norm_axis(k->n->a.axis, s->rank);
  vari(&k->v, "OUTER", prod(s, 0, ax));
  vari(&k->v, "N", s->dim[ax]);
  vari(&k->v, "INNER", prod(s, ax + 1, s->rank));
  return "c/softmax.c.tmpl";
}

static const char *k_norm(KernelCtx *k) {
  const Shape *s = &k->n->shape;
  int ax = norm_axis(k->n->a.axis, s->rank);
  bool gamma = k->n->nin >= 2, beta = k->n->nin >= 3;
  vari(&k->v, "ROWS", prod(s, 0, ax));
  vari(&k->v, "D", prod(s, ax, s->rank));
  var(&k->v, "EPS", emit_float(k->n->a.eps));
  var(&k->v, "PARAMS", kiln_fmt("%s%s", gamma ? ", const float *restrict gamma" : "", beta ? ", const float *restrict beta" : ""));
  var(&k->v, "AFFINE", kiln_fmt("%s%s", gamma ? " * gamma[j]" : "", beta ? " + beta[j]" : ""));
  var(&k->v, "AFFINE_DOC", kiln_fmt("%s%s", gamma ? " * gamma" : "", beta ? " + beta" : ""));
  return k->n->op == OP_LAYERNORM ? "c/layernorm.c.tmpl" : "c/rmsnorm.c.tmpl";
}

static const char *k_batchnorm(KernelCtx *k) {
  const Shape *s = &k->n->shape;
  vari(&k->v, "NB", s->dim[0]);
  vari(&k->v, "C", s->rank > 1 ? s->dim[1] : 1);
  vari(&k->v, "PLANE", prod(s, 2, s->rank));
  var(&k->v, "EPS", emit_float(k->n->a.eps));
  return "c/batchnorm.c.tmpl";
}

/* A strided copy (transpose, slice): st[1] are x's element strides per output dim. */
static void copy_vars(KernelCtx *k, int64_t st[2][KILN_MAX_RANK]) {
  emit_strides(&k->n->shape, st[0]);
  Loops l = loops_make(&k->n->shape, 2, st);
  const char *names[] = {NULL, "XSTRIDES"};
  loops_vars(k, &l, names, 2);
  vari(&k->v, "INNER_STRIDE", l.inner_stride[1]);
  var(&k->v, "T", emit_c_type(k->n->dtype));
}

static const char *k_transpose(KernelCtx *k) {
  int64_t xs[KILN_MAX_RANK], st[2][KILN_MAX_RANK];
  emit_strides(&IN(0)->shape, xs);
  for (int i = 0; i < k->n->shape.rank; i++) st[1][i] = xs[k->n->a.perm[i]];
  copy_vars(k, st);
  return "c/transpose.c.tmpl";
}

static const char *k_slice(KernelCtx *k) {
  const Attrs *a = &k->n->a;
  int64_t xs[KILN_MAX_RANK], st[2][KILN_MAX_RANK], base = 0;
  emit_strides(&IN(0)->shape, xs);
  for (int i = 0; i < k->n->shape.rank; i++) {
    st[1][i] = xs[i] * a->step[i];
    base += a->start[i] * xs[i];
  }
  copy_vars(k, st);
  vari(&k->v, "BASE", base);
  return "c/slice.c.tmpl";
}

static const char *k_concat(KernelCtx *k) {
  const Shape *s = &k->n->shape;
  int ax = norm_axis(k->n->a.axis, s->rank);
  int64_t after = prod(s, ax + 1, s->rank), at = 0;
  const char *t = emit_c_type(k->n->dtype);
  Buf params = {0}, parts = {0};
  for (int i = 0; i < k->n->nin; i++) {
    int64_t len = IN(i)->shape.dim[ax] * after;
    buf_printf(&params, "%sconst %s *restrict x%d", i ? ", " : "", t, i);
    Vars p = {0};
    var(&p, "K", kiln_fmt("%d", i));
    vari(&p, "LEN", len);
    vari(&p, "AT", at);
    var(&p, "EPILOGUE", emit_hook_epilogue);
    expand(&parts, "c/concat_part.c.tmpl", &p);
    at += len;
  }
  var(&k->v, "T", t);
  vari(&k->v, "OUTER", prod(s, 0, ax));
  vari(&k->v, "ROW", at);
  var(&k->v, "PARAMS", kiln_strdup(params.data));
  var(&k->v, "PARTS", kiln_strdup(parts.data));
  buf_free(&params);
  buf_free(&parts);
  return "c/concat.c.tmpl";
}

static const char *k_gather(KernelCtx *k) {
  const Shape *x = &IN(0)->shape;
  int ax = norm_axis(k->n->a.axis, x->rank);
  var(&k->v, "T", emit_c_type(k->n->dtype));
  vari(&k->v, "OUTER", prod(x, 0, ax));
  vari(&k->v, "N", x->dim[ax]);
  vari(&k->v, "INNER", prod(x, ax + 1, x->rank));
  vari(&k->v, "NIDX", node_numel(IN(1)));
  return "c/gather.c.tmpl";
}

#undef IN

/* Fills k->v for one family and returns the template to expand. */
typedef const char *RenderFn(KernelCtx *k);
static RenderFn *const render[FAM__COUNT] = {
    [FAM_UNARY] = k_unary,         [FAM_BINARY] = k_binary,   [FAM_SELECT] = k_select,
    [FAM_CAST] = k_cast,           [FAM_MATMUL] = k_matmul,   [FAM_CONV] = k_conv,
    [FAM_POOL] = k_pool,           [FAM_REDUCE] = k_reduce,   [FAM_SOFTMAX] = k_softmax,
    [FAM_NORM] = k_norm,           [FAM_BATCHNORM] = k_batchnorm, [FAM_TRANSPOSE] = k_transpose,
    [FAM_CONCAT] = k_concat,       [FAM_SLICE] = k_slice,     [FAM_GATHER] = k_gather,
};

/* Kernel pointers are restrict: a kernel's result must not share bytes with anything
 * the kernel reads. pass_memplan promises that; a broken promise would be silent
 * wrong answers. Values inside a fused kernel have no storage and are not read. */
static void check_no_overlap(Graph *g, const Kernel *kr) {
  const Node *r = node(g, kr->nodes[kr->nnodes - 1]);
  for (int j = 0; j < kr->nnodes; j++) {
    const Node *n = node(g, kr->nodes[j]);
    for (int i = 0; i < n->nin; i++) {
      const Node *x = input(g, n, i);
      bool same_buffer = x->region == r->region &&
                         (r->region == REG_ARENA || ((r->region == REG_OUTPUT) && x->io_slot == r->io_slot));
      if (same_buffer && x->offset < r->offset + node_bytes(r) && r->offset < x->offset + node_bytes(x))
        die("C: %%%d (%s) overlaps %%%d, read by its kernel, in the %s", r->id, kiln_ops[r->op].name, x->id,
            r->region == REG_ARENA ? "arena" : "output buffer");
    }
  }
}

/* The C spelling of what the epilogue of a fused kernel needs (emit_common.c). */
static const EmitTarget c_target = {
    .fns = emit_c_fns, .type = emit_c_type, .cast = cast_expr, .index_type = "int64_t", .int_suffix = "",
    .read_ptr = "const %s *restrict ", .helper_tmpl = "c/epilogue.c.tmpl", .step_tmpl = "c/epilogue_step.c.tmpl",
    .operand_tmpl = "c/epilogue_operand.c.tmpl",
};

/* Appends kernel ki's function (after its epilogue helper, if fused) to out and its
 * call to calls. The anchor's family renders the kernel; the chain is the helper. */
static void emit_kernel(const Ctx *c, int ki, Buf *out, Buf *calls) {
  Graph *g = c->g;
  const Kernel *kr = &g->kernels[ki];
  Node *n = node(g, kr->nodes[0]), *res = node(g, kr->nodes[kr->nnodes - 1]);
  check_no_overlap(g, kr);
  RenderFn *fn = render[kiln_ops[n->op].family];
  if (!fn) die("C: no kernel template for op %s", kiln_ops[n->op].name);
  EmitEpilogue e;
  emit_epilogue(g, kr, c->kname[ki], c->ename[ki], &c_target, &e);
  KernelCtx k = {.c = c, .g = g, .n = n};
  var(&k.v, "NAME", c->kname[ki]);
  const char *desc = describe(g, n);
  if (e.fused) desc = kiln_fmt("%s, then %s", desc, strchr(e.ops, '+') + 2);
  var(&k.v, "DESC", comment_safe(desc));
  var(&k.v, "LOC", e.lines);
  Buf eparams = {0};
  for (int i = 0; i < e.nextra; i++)
    buf_printf(&eparams, ", const %s *restrict %s", emit_c_type(e.extra[i]->dtype), e.extra_name[i]);
  var(&k.v, "EPARAMS", eparams.len ? kiln_strdup(eparams.data) : "");
  buf_free(&eparams);
  var(&k.v, "EPILOGUE", emit_hook_epilogue);
  var(&k.v, "IF_FUSED", emit_hook_fused);
  const char *tmpl = fn(&k);
  buf_puts(out, e.helper);
  buf_puts(out, emit_epilogue_apply(expand_str(tmpl, &k.v), &e));

  Buf args = {0};
  for (int i = 0; i < n->nin; i++) buf_printf(&args, "%s, ", operand_ptr(c, input(g, n, i), false));
  for (int i = 0; i < e.nextra; i++) buf_printf(&args, "%s, ", operand_ptr(c, e.extra[i], false));
  buf_puts(&args, operand_ptr(c, res, true));
  Vars cv = {0};
  var(&cv, "NAME", c->kname[ki]);
  var(&cv, "ARGS", args.data);
  expand(calls, "c/call.c.tmpl", &cv);
  buf_free(&args);
}

/* ---- the files ---- */

static const char *offset_line(const char *name, int64_t value, const char *what) {
  Vars v = {0};
  var(&v, "NAME", name);
  vari(&v, "VALUE", value);
  var(&v, "WHAT", comment_safe(what));
  return expand_str("c/offset.c.tmpl", &v);
}

/* The W_ enum (weights in offset order) and the A_ enum (arena values in schedule order). */
static void offset_enums(const Ctx *c, Vars *fv) {
  Graph *g = c->g;
  Buf wl = {0}, al = {0};
  for (int i = 0; i < g->nnodes; i++)
    if (c->wname[i]) {
      Node *n = g->nodes[i];
      const char *what = kiln_fmt("%s %s %s", dtype_name(n->dtype), shape_of(n), n->name ? n->name : kiln_ops[n->op].name);
      buf_puts(&wl, offset_line(c->wname[i], n->offset, what));
    }
  for (int k = 0; k < g->nkernels; k++) {
    Node *n = node(g, g->kernels[k].nodes[g->kernels[k].nnodes - 1]);
    if (!c->aname[n->id]) continue;
    const char *what = kiln_fmt("%s %s, %lld bytes", dtype_name(n->dtype), shape_of(n), (long long)node_bytes(n));
    buf_puts(&al, offset_line(c->aname[n->id], n->offset, what));
  }
  Vars wv = {0}, av = {0};
  var(&wv, "ENTRIES", wl.data ? wl.data : "");
  var(&av, "ENTRIES", al.data ? al.data : "");
  vari(&av, "ARENA_SIZE", g->arena_size);
  var(fv, "WEIGHT_ENUM", wl.len ? expand_str("c/weight_enum.c.tmpl", &wv) : "");
  var(fv, "ARENA_ENUM", al.len ? expand_str("c/arena_enum.c.tmpl", &av) : "");
  buf_free(&wl);
  buf_free(&al);
}

/* ", const float *image, float *logits" for the run function. */
static char *run_params(const Ctx *c) {
  Buf b = {0};
  Graph *g = c->g;
  for (int i = 0; i < g->ninputs; i++)
    buf_printf(&b, ", const %s *%s", emit_c_type(node(g, g->inputs[i].node)->dtype), c->in_param[i]);
  for (int i = 0; i < g->noutputs; i++)
    buf_printf(&b, ", %s *%s", emit_c_type(node(g, g->outputs[i].node)->dtype), c->out_param[i]);
  char *s = kiln_strdup(b.data ? b.data : "");
  buf_free(&b);
  return s;
}

static void emit_source(const Ctx *c, Buf *out) {
  Graph *g = c->g;
  Buf kernels = {0}, calls = {0}, vargs = {0};
  for (int k = 0; k < g->nkernels; k++) emit_kernel(c, k, &kernels, &calls);
  for (int i = 0; i < g->ninputs; i++)
    buf_printf(&vargs, ", (const %s *)inputs[%d]", emit_c_type(node(g, g->inputs[i].node)->dtype), i);
  for (int i = 0; i < g->noutputs; i++)
    buf_printf(&vargs, ", (%s *)outputs[%d]", emit_c_type(node(g, g->outputs[i].node)->dtype), i);
  Vars rv = {0};
  var(&rv, "MODEL", c->model);
  var(&rv, "PARAMS", run_params(c));
  var(&rv, "CALLS", calls.data ? calls.data : "");
  var(&rv, "VARGS", vargs.data ? vargs.data : "");
  /* (void) for the pointers a model does not use, so -Wextra stays quiet */
  const char *calltext = calls.data ? calls.data : "";
  var(&rv, "UNUSED", kiln_fmt("%s%s", strstr(calltext, "(w + ") ? "" : "  (void)w;\n",
                              strstr(calltext, "(a + ") ? "" : "  (void)a;\n"));
  var(&rv, "UNUSED_V", kiln_fmt("%s%s", g->ninputs ? "" : "  (void)inputs;\n", g->noutputs ? "" : "  (void)outputs;\n"));
  Vars fv = {0};
  var(&fv, "MODEL", c->model);
  var(&fv, "SCRIPT", comment_safe(g->script ? g->script : "?"));
  vari(&fv, "NKERNELS", g->nkernels);
  offset_enums(c, &fv);
  var(&fv, "KERNELS", kernels.data ? kernels.data : "");
  var(&fv, "RUN", expand_str("c/run.c.tmpl", &rv));
  expand(out, "c/file.c.tmpl", &fv);
  buf_free(&kernels);
  buf_free(&calls);
  buf_free(&vargs);
}

/* The per-I/O doc lines and #defines of the header, for inputs or outputs. */
static void io_lines(const Ctx *c, bool outputs, Buf *doc, Buf *defs, Buf *sizes, Buf *names) {
  Graph *g = c->g;
  int n = outputs ? g->noutputs : g->ninputs;
  for (int i = 0; i < n; i++) {
    const GraphIO *io = outputs ? &g->outputs[i] : &g->inputs[i];
    Node *nd = node(g, io->node);
    Vars v = {0};
    var(&v, "UPPER", c->upper);
    var(&v, "STEM", outputs ? c->out_stem[i] : c->in_stem[i]);
    var(&v, "KIND", outputs ? "output" : "input");
    var(&v, "NAME", io->name);
    var(&v, "DTYPE", dtype_name(nd->dtype));
    var(&v, "SHAPE", shape_of(nd));
    var(&v, "BYTES", kiln_fmt("%lld", (long long)node_bytes(nd)));
    var(&v, "NUMEL", kiln_fmt("%lld", (long long)node_numel(nd)));
    expand(doc, "c/io_doc.h.tmpl", &v);
    expand(defs, "c/io_define.h.tmpl", &v);
    buf_printf(sizes, "%s%s_%s_SIZE", i ? ", " : "", c->upper, outputs ? c->out_stem[i] : c->in_stem[i]);
    buf_printf(names, "%s\"%s\"", i ? ", " : "", io->name);
  }
  if (n == 0) {
    buf_puts(doc, " *   (none)\n");
    buf_puts(sizes, "0");
    buf_puts(names, "\"\"");
  }
}

static void emit_header(const Ctx *c, uint64_t checksum, bool embed, Buf *out) {
  Graph *g = c->g;
  Buf idoc = {0}, odoc = {0}, defs = {0}, isz = {0}, osz = {0}, inm = {0}, onm = {0};
  io_lines(c, false, &idoc, &defs, &isz, &inm);
  io_lines(c, true, &odoc, &defs, &osz, &onm);
  Vars v = {0};
  var(&v, "MODEL", c->model);
  var(&v, "UPPER", c->upper);
  var(&v, "SCRIPT", comment_safe(g->script ? g->script : "?"));
  var(&v, "INPUT_DOC", idoc.data);
  var(&v, "OUTPUT_DOC", odoc.data);
  var(&v, "WEIGHTS_SIZE", kiln_fmt("%lld", (long long)g->weights_size));
  var(&v, "CHECKSUM", kiln_fmt("%016llx", (unsigned long long)checksum));
  var(&v, "FILE_SIZE", kiln_fmt("%lld", (long long)g->weights_size + KILN_ALIGN));
  var(&v, "ARENA_SIZE", kiln_fmt("%lld", (long long)g->arena_size));
  var(&v, "NUM_INPUTS", kiln_fmt("%d", g->ninputs));
  var(&v, "NUM_OUTPUTS", kiln_fmt("%d", g->noutputs));
  var(&v, "IO_DEFINES", defs.data ? defs.data : "");
  var(&v, "INPUT_SIZES", isz.data);
  var(&v, "OUTPUT_SIZES", osz.data);
  var(&v, "INPUT_NAMES", inm.data);
  var(&v, "OUTPUT_NAMES", onm.data);
  var(&v, "PARAMS", run_params(c));
  var(&v, "EMBED_DECL", embed ? expand_str("c/embed_decl.h.tmpl", &v) : "");
  expand(out, "c/header.h.tmpl", &v);
  Buf *all[] = {&idoc, &odoc, &defs, &isz, &osz, &inm, &onm};
  for (int i = 0; i < 7; i++) buf_free(all[i]);
}

/* <m>_weights.c: the blob as hex bytes, 16 a line. */
static void emit_embedded(const Ctx *c, const Buf *blob, Buf *out) {
  static const char hex[] = "0123456789abcdef";
  Buf bytes = {0};
  char line[16 * 6 + 4];
  for (size_t i = 0; i < blob->len; i += 16) {
    char *p = line;
    *p++ = ' ';
    for (size_t j = i; j < i + 16 && j < blob->len; j++) {
      unsigned char b = (unsigned char)blob->data[j];
      *p++ = ' ', *p++ = '0', *p++ = 'x', *p++ = hex[b >> 4], *p++ = hex[b & 15], *p++ = ',';
    }
    *p++ = '\n';
    buf_put(&bytes, line, (size_t)(p - line));
  }
  Vars v = {0};
  var(&v, "MODEL", c->model);
  var(&v, "UPPER", c->upper);
  var(&v, "SCRIPT", comment_safe(c->g->script ? c->g->script : "?"));
  var(&v, "BYTES", bytes.data ? bytes.data : "");
  expand(out, "c/weights.c.tmpl", &v);
  buf_free(&bytes);
}

void emit_c(Graph *g, const EmitOptions *o) {
  Ctx c = {0};
  ctx_init(&c, g);
  Buf blob = {0}, hdr = {0}, src = {0};
  uint64_t checksum = 0;
  weights_blob(g, &blob, &checksum);
  emit_header(&c, checksum, o->embed_weights, &hdr);
  emit_source(&c, &src);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.h", g->model), hdr.data, hdr.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.c", g->model), src.data, src.len);
  kiln_write_file(o->tmpdir, kiln_fmt("%s.weights", g->model), blob.data, blob.len);
  if (o->embed_weights) {
    Buf emb = {0};
    emit_embedded(&c, &blob, &emb);
    kiln_write_file(o->tmpdir, kiln_fmt("%s_weights.c", g->model), emb.data, emb.len);
    buf_free(&emb);
  }
  buf_free(&blob);
  buf_free(&hdr);
  buf_free(&src);
}
