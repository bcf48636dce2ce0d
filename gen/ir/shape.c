/*
 * shape.c — the shape and dtype rule of every op.
 *
 * shape_infer checks what every op shares (arity from the op table, f32-only
 * operands for OPF_F32 ops, bool results for OPF_CMP ops), then calls the op's
 * own rule: rules[] is built from the KILN_OPS X-macro as shape_<ID>, so an op
 * without a rule is a compile error. Ops of one family share a function through
 * a #define (shape_ADD is shape_binary).
 *
 * A rule sets n->shape and n->dtype from the inputs and attributes, or writes a
 * message and returns false. Messages start with the op name and show the
 * shapes, because the frontend prints them after the user's file:line:
 *   add: shapes [2, 3] and [4] do not broadcast
 * Attributes arrive normalised by the frontend (axes non-negative, slices
 * resolved, reshape targets without -1); rules still check every range, since
 * an attribute out of range would make a kernel read out of bounds.
 */
#include "kiln.h"

#include <math.h>
#include <string.h>

/* Writes the message and returns false, so a rule can `return fail(...)`. */
static bool fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return false;
}

#define FAIL(...) fail(err, errlen, __VA_ARGS__)
#define OPNAME (kiln_ops[n->op].name)
#define IN(i) (graph_node(g, n->in[i]))
#define SH(i) shape_str(&IN(i)->shape)

/* NumPy broadcasting: aligns a and b on their trailing dims, a 1 stretching to the other side.
 * Writes the result rank max(a, b) to *out and returns true; returns false (out untouched) on a clash. */
bool shape_broadcast(const Shape *a, const Shape *b, Shape *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  Shape s = {.rank = r};
  for (int i = 0; i < r; i++) {
    int ia = a->rank - r + i, ib = b->rank - r + i;
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    s.dim[i] = da == 1 ? db : da;
  }
  *out = s;
  return true;
}

/* Contract in kiln.h: multiplies dim by dim, stopping before the product could overflow. */
int64_t shape_numel_checked(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->dim[i] < 0 || s->dim[i] > KILN_MAX_NUMEL) return -1;
    n *= s->dim[i];                     /* both factors <= 2^31: no overflow */
    if (n > KILN_MAX_NUMEL) return -1;
  }
  return n;
}

/* Every dim positive, the rank within bounds, the size within KILN_MAX_NUMEL: Kiln has
 * no empty tensors, and no tensor its generated code could not index. */
static bool check_dims(const Node *n, const Shape *s, const char *what, char *err, size_t errlen) {
  if (s->rank < 0 || s->rank > KILN_MAX_RANK)
    return FAIL("%s: %s has rank %d; Kiln allows 0..%d", OPNAME, what, s->rank, KILN_MAX_RANK);
  for (int i = 0; i < s->rank; i++)
    if (s->dim[i] < 1) return FAIL("%s: %s %s has an empty or negative dim", OPNAME, what, shape_str(s));
  if (shape_numel_checked(s) < 0)
    return FAIL("%s: %s %s has more than %d elements, Kiln's limit per tensor", OPNAME, what, shape_str(s), KILN_MAX_NUMEL);
  return true;
}

/* ---- leaves ---- */

/* INPUT/WEIGHT/CONST: the tracer already set dtype and shape; only checks them
 * (known dtype, i64 for an INPUT only; positive dims, within rank and size limits). */
static bool shape_leaf(Graph *g, Node *n, char *err, size_t errlen) {
  (void)g;
  bool known = n->dtype == DT_F32 || n->dtype == DT_I32 || n->dtype == DT_BOOL || (n->dtype == DT_I64 && n->op == OP_INPUT);
  if (!known) return FAIL("%s: bad dtype %d", OPNAME, (int)n->dtype);   /* i64: inputs only */
  return check_dims(n, &n->shape, "shape", err, errlen);
}
#define shape_INPUT shape_leaf
#define shape_WEIGHT shape_leaf
#define shape_CONST shape_leaf
#define shape_STATE shape_leaf

/* ---- elementwise ---- */

/* Elementwise binary op: out = broadcast(in0, in1), f32 (check_inputs already required both
 * operands f32, the ops being OPF_F32); comparisons are turned to bool by shape_infer. */
static bool shape_binary(Graph *g, Node *n, char *err, size_t errlen) {
  if (!shape_broadcast(&IN(0)->shape, &IN(1)->shape, &n->shape))
    return FAIL("%s: shapes %s and %s do not broadcast", OPNAME, SH(0), SH(1));
  n->dtype = IN(0)->dtype;
  return true;
}
#define shape_ADD shape_binary
#define shape_SUB shape_binary
#define shape_MUL shape_binary
#define shape_DIV shape_binary
#define shape_POW shape_binary
#define shape_MAX shape_binary
#define shape_MIN shape_binary
#define shape_FMOD shape_binary
#define shape_REMAINDER shape_binary
#define shape_EQ shape_binary
#define shape_NE shape_binary
#define shape_LT shape_binary
#define shape_LE shape_binary
#define shape_GT shape_binary
#define shape_GE shape_binary

/* where(cond, a, b): cond must be bool, a and b share a dtype; out is the three-way
 * broadcast of the shapes with a's dtype. */
static bool shape_WHERE(Graph *g, Node *n, char *err, size_t errlen) {
  if (IN(0)->dtype != DT_BOOL) return FAIL("where: condition must be bool, got %s%s", dtype_name(IN(0)->dtype), SH(0));
  if (IN(1)->dtype != IN(2)->dtype)
    return FAIL("where: branches differ in dtype: %s%s and %s%s", dtype_name(IN(1)->dtype), SH(1),
                dtype_name(IN(2)->dtype), SH(2));
  Shape s;
  if (!shape_broadcast(&IN(0)->shape, &IN(1)->shape, &s) || !shape_broadcast(&s, &IN(2)->shape, &n->shape))
    return FAIL("where: shapes %s, %s and %s do not broadcast", SH(0), SH(1), SH(2));
  n->dtype = IN(1)->dtype;
  return true;
}

/* Elementwise unary op (and COPY, the one of them open to any dtype): out has in0's shape
 * and dtype; cannot fail. */
static bool shape_unary(Graph *g, Node *n, char *err, size_t errlen) {
  (void)err, (void)errlen;
  n->shape = IN(0)->shape;
  n->dtype = IN(0)->dtype;
  return true;
}
#define shape_NEG shape_unary
#define shape_ABS shape_unary
#define shape_EXP shape_unary
#define shape_LOG shape_unary
#define shape_SQRT shape_unary
#define shape_RSQRT shape_unary
#define shape_TANH shape_unary
#define shape_SIGMOID shape_unary
#define shape_RELU shape_unary
#define shape_GELU shape_unary
#define shape_GELU_TANH shape_unary
#define shape_SILU shape_unary
#define shape_SIN shape_unary
#define shape_COS shape_unary
#define shape_ERF shape_unary
#define shape_FLOOR shape_unary
#define shape_CEIL shape_unary
#define shape_ROUND shape_unary
#define shape_ROUND_F16 shape_unary
#define shape_COPY shape_unary

/* out keeps in0's shape and takes dtype a.to; fails only on a target outside DType. */
static bool shape_CAST(Graph *g, Node *n, char *err, size_t errlen) {
  if (n->a.to != DT_F32 && n->a.to != DT_I32 && n->a.to != DT_BOOL) return FAIL("cast: bad target dtype %d", (int)n->a.to);
  if (IN(0)->dtype == DT_I64 && n->a.to != DT_I32) return FAIL("cast: an i64 input casts to i32 only, not %s", dtype_name(n->a.to));
  n->shape = IN(0)->shape;
  n->dtype = n->a.to;
  return true;
}

/* ---- contractions and windows ---- */

/* x [..., m, k] @ y [..., k, n] (a.trans_x/trans_y swap each operand's last two dims):
 * out is the broadcast batch dims + [m, n], f32. Fails on rank < 2, k mismatch, batch clash. */
static bool shape_MATMUL(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *y = &IN(1)->shape;
  if (x->rank < 2 || y->rank < 2) return FAIL("matmul: operands need rank >= 2: %s @ %s", SH(0), SH(1));
  int64_t m = x->dim[x->rank - 2], k = x->dim[x->rank - 1];
  if (n->a.trans_x) m = x->dim[x->rank - 1], k = x->dim[x->rank - 2];
  int64_t k2 = y->dim[y->rank - 2], nn = y->dim[y->rank - 1];
  if (n->a.trans_y) k2 = y->dim[y->rank - 1], nn = y->dim[y->rank - 2];
  if (k != k2)
    return FAIL("matmul: inner dims differ: %s%s @ %s%s", SH(0), n->a.trans_x ? "^T" : "", SH(1), n->a.trans_y ? "^T" : "");
  Shape bx = *x, by = *y, b;
  bx.rank -= 2, by.rank -= 2;
  if (!shape_broadcast(&bx, &by, &b)) return FAIL("matmul: batch dims do not broadcast: %s @ %s", SH(0), SH(1));
  if (b.rank + 2 > KILN_MAX_RANK) return FAIL("matmul: result rank exceeds %d", KILN_MAX_RANK);
  b.dim[b.rank++] = m;
  b.dim[b.rank++] = nn;
  n->shape = b;
  n->dtype = DT_F32;
  return true;
}

/* floor((size + pads - span) / stride) + 1, or <= 0 when the window does not fit. */
static int64_t window_out(int64_t size, int pad_lo, int pad_hi, int64_t span, int stride) {
  int64_t room = size + pad_lo + pad_hi - span;
  if (room < 0) return 0;
  return room / stride + 1;
}

/* x [N, C, H, W] * w [O, C/groups, KH, KW] (+ bias [O]) -> [N, O, OH, OW] f32. Checks groups,
 * stride, dilation >= 1, padding >= 0, channel counts and that the dilated kernel fits. */
static bool shape_CONV2D(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *w = &IN(1)->shape;
  const Attrs *a = &n->a;
  if (x->rank != 4 || w->rank != 4) return FAIL("conv2d: needs x [N, C, H, W] and w [O, C/groups, KH, KW]: x %s, w %s", SH(0), SH(1));
  if (a->groups < 1) return FAIL("conv2d: groups %d must be >= 1", a->groups);
  for (int i = 0; i < 2; i++) {
    if (a->stride[i] < 1) return FAIL("conv2d: stride [%d, %d] must be >= 1", a->stride[0], a->stride[1]);
    if (a->dilation[i] < 1) return FAIL("conv2d: dilation [%d, %d] must be >= 1", a->dilation[0], a->dilation[1]);
  }
  for (int i = 0; i < 4; i++)
    if (a->pad[i] < 0) return FAIL("conv2d: padding [%d, %d, %d, %d] must be >= 0", a->pad[0], a->pad[1], a->pad[2], a->pad[3]);
  int64_t c = x->dim[1], o = w->dim[0];
  if (c % a->groups != 0 || o % a->groups != 0)
    return FAIL("conv2d: groups %d must divide input channels %lld and output channels %lld: x %s, w %s", a->groups,
                (long long)c, (long long)o, SH(0), SH(1));
  if (w->dim[1] != c / a->groups)
    return FAIL("conv2d: input has %lld channels, weight expects %lld (groups %d): x %s, w %s", (long long)c,
                (long long)(w->dim[1] * a->groups), a->groups, SH(0), SH(1));
  if (n->nin == 3 && !(IN(2)->shape.rank == 1 && IN(2)->shape.dim[0] == o))
    return FAIL("conv2d: bias must be [%lld], got %s", (long long)o, SH(2));
  int64_t oh = window_out(x->dim[2], a->pad[0], a->pad[2], (int64_t)a->dilation[0] * (w->dim[2] - 1) + 1, a->stride[0]);
  int64_t ow = window_out(x->dim[3], a->pad[1], a->pad[3], (int64_t)a->dilation[1] * (w->dim[3] - 1) + 1, a->stride[1]);
  if (oh <= 0 || ow <= 0)
    return FAIL("conv2d: kernel larger than the padded input: x %s, w %s, padding [%d, %d, %d, %d], dilation [%d, %d]", SH(0),
                SH(1), a->pad[0], a->pad[1], a->pad[2], a->pad[3], a->dilation[0], a->dilation[1]);
  n->shape = (Shape){4, {x->dim[0], o, oh, ow}};
  n->dtype = DT_F32;
  return true;
}

/* CONV_TRANSPOSE2D: x [N, C, H, W], w [C, O/groups, KH, KW] (PyTorch's layout), optional
 * bias [O]; OH = (H - 1) stride - pad_top - pad_bottom + dilation (KH - 1) + 1 (same for
 * W), >= 1. pad_bottom/right are PyTorch's padding minus output_padding, so they may be
 * negative, down to 1 - max(stride, dilation) (PyTorch's output_padding bound). */
static bool shape_CONV_TRANSPOSE2D(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *w = &IN(1)->shape;
  const Attrs *a = &n->a;
  if (x->rank != 4 || w->rank != 4)
    return FAIL("conv_transpose2d: needs x [N, C, H, W] and w [C, O/groups, KH, KW]: x %s, w %s", SH(0), SH(1));
  if (a->groups < 1) return FAIL("conv_transpose2d: groups %d must be >= 1", a->groups);
  for (int i = 0; i < 2; i++) {
    if (a->stride[i] < 1) return FAIL("conv_transpose2d: stride [%d, %d] must be >= 1", a->stride[0], a->stride[1]);
    if (a->dilation[i] < 1) return FAIL("conv_transpose2d: dilation [%d, %d] must be >= 1", a->dilation[0], a->dilation[1]);
    int most = a->stride[i] > a->dilation[i] ? a->stride[i] : a->dilation[i];
    if (a->pad[i] < 0 || a->pad[i + 2] <= -most)
      return FAIL("conv_transpose2d: padding [%d, %d, %d, %d] (bottom/right less output_padding) out of range for stride [%d, %d], "
                  "dilation [%d, %d]: output_padding must be smaller than stride or dilation",
                  a->pad[0], a->pad[1], a->pad[2], a->pad[3], a->stride[0], a->stride[1], a->dilation[0], a->dilation[1]);
  }
  int64_t c = x->dim[1], o = w->dim[1] * a->groups;
  if (w->dim[0] != c || c % a->groups != 0)
    return FAIL("conv_transpose2d: input has %lld channels, weight [C, O/groups, KH, KW] expects %lld (groups %d): x %s, w %s",
                (long long)c, (long long)w->dim[0], a->groups, SH(0), SH(1));
  if (n->nin == 3 && !(IN(2)->shape.rank == 1 && IN(2)->shape.dim[0] == o))
    return FAIL("conv_transpose2d: bias must be [%lld], got %s", (long long)o, SH(2));
  int64_t oh = (x->dim[2] - 1) * a->stride[0] - a->pad[0] - a->pad[2] + (int64_t)a->dilation[0] * (w->dim[2] - 1) + 1;
  int64_t ow = (x->dim[3] - 1) * a->stride[1] - a->pad[1] - a->pad[3] + (int64_t)a->dilation[1] * (w->dim[3] - 1) + 1;
  if (oh <= 0 || ow <= 0)
    return FAIL("conv_transpose2d: padding [%d, %d, %d, %d] leaves no output: x %s, w %s", a->pad[0], a->pad[1], a->pad[2],
                a->pad[3], SH(0), SH(1));
  Shape s = {4, {x->dim[0], o, oh, ow}};
  if (shape_numel_checked(&s) < 0) return FAIL("conv_transpose2d: output %s has too many elements", shape_str(&s));
  n->shape = s;
  n->dtype = DT_F32;
  return true;
}

/* MAXPOOL2D/AVGPOOL2D: x [N, C, H, W] -> [N, C, OH, OW] f32. Kernel and stride >= 1,
 * each pad at most half its kernel dim, and the window must fit the padded input. */
static bool shape_pool(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  const Attrs *a = &n->a;
  if (x->rank != 4) return FAIL("%s: needs x [N, C, H, W], got %s", OPNAME, SH(0));
  for (int i = 0; i < 2; i++) {
    if (a->kernel[i] < 1) return FAIL("%s: kernel [%d, %d] must be >= 1", OPNAME, a->kernel[0], a->kernel[1]);
    if (a->stride[i] < 1) return FAIL("%s: stride [%d, %d] must be >= 1", OPNAME, a->stride[0], a->stride[1]);
  }
  for (int i = 0; i < 4; i++)
    if (a->pad[i] < 0 || a->pad[i] > a->kernel[i % 2] / 2)
      return FAIL("%s: padding [%d, %d, %d, %d] must be between 0 and half the kernel [%d, %d]", OPNAME, a->pad[0], a->pad[1],
                  a->pad[2], a->pad[3], a->kernel[0], a->kernel[1]);
  int64_t oh = window_out(x->dim[2], a->pad[0], a->pad[2], a->kernel[0], a->stride[0]);
  int64_t ow = window_out(x->dim[3], a->pad[1], a->pad[3], a->kernel[1], a->stride[1]);
  if (oh <= 0 || ow <= 0)
    return FAIL("%s: kernel [%d, %d] larger than the padded input %s", OPNAME, a->kernel[0], a->kernel[1], SH(0));
  n->shape = (Shape){4, {x->dim[0], x->dim[1], oh, ow}};
  n->dtype = DT_F32;
  return true;
}
#define shape_MAXPOOL2D shape_pool
#define shape_AVGPOOL2D shape_pool

/* ---- reductions and normalisations ---- */

/* x's shape without the dims whose bit is set in axes, or with them kept as 1. */
static Shape reduced_shape(const Shape *x, uint32_t axes, bool keep) {
  Shape s = {0};
  for (int i = 0; i < x->rank; i++) {
    if (!(axes & (1u << i))) s.dim[s.rank++] = x->dim[i];
    else if (keep) s.dim[s.rank++] = 1;
  }
  return s;
}

/* REDUCE_SUM/MEAN/MAX/MIN/PROD over the dims set in the a.axes bitmask: those dims are dropped,
 * or kept as 1 with a.keepdims; f32. Fails on a mask bit at or beyond x's rank. */
static bool shape_reduce(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  uint32_t all = x->rank >= 32 ? 0xffffffffu : (1u << x->rank) - 1;
  if (n->a.axes & ~all) return FAIL("%s: axes mask 0x%x names dims beyond rank %d of %s", OPNAME, n->a.axes, x->rank, SH(0));
  n->shape = reduced_shape(x, n->a.axes, n->a.keepdims);
  n->dtype = DT_F32;
  return true;
}
#define shape_REDUCE_SUM shape_reduce
#define shape_REDUCE_MEAN shape_reduce
#define shape_REDUCE_MAX shape_reduce
#define shape_REDUCE_MIN shape_reduce
#define shape_REDUCE_PROD shape_reduce

/* ARGMAX/ARGMIN along a.axis of an f32 x of rank >= 1: that dim dropped, or kept as 1
 * with a.keepdims; the result is i32 (indices). */
static bool shape_argreduce(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  if (n->a.axis < 0 || n->a.axis >= x->rank) return FAIL("%s: axis %d out of range for %s", OPNAME, n->a.axis, SH(0));
  n->shape = reduced_shape(x, 1u << n->a.axis, n->a.keepdims);
  n->dtype = DT_I32;
  return true;
}
#define shape_ARGMAX shape_argreduce
#define shape_ARGMIN shape_argreduce

/* Softmax along a.axis (already normalised to 0..rank-1 by the tracer): out = x's shape, f32. */
static bool shape_SOFTMAX(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  if (n->a.axis < 0 || n->a.axis >= x->rank) return FAIL("softmax: axis %d out of range for %s", n->a.axis, SH(0));
  n->shape = *x;
  n->dtype = DT_F32;
  return true;
}

/* eps must be a finite non-negative number. */
static bool check_eps(Node *n, char *err, size_t errlen) {
  if (!(n->a.eps >= 0.0f) || isinf(n->a.eps)) return FAIL("%s: eps %g must be finite and >= 0", OPNAME, (double)n->a.eps);
  return true;
}

/* LAYERNORM, RMSNORM: normalise dims axis..rank-1; gamma (and beta) have shape x.shape[axis:]. */
static bool shape_norm(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  if (n->a.axis < 0 || n->a.axis >= x->rank) return FAIL("%s: axis %d out of range for %s", OPNAME, n->a.axis, SH(0));
  if (!check_eps(n, err, errlen)) return false;
  Shape tail = {.rank = x->rank - n->a.axis};
  for (int i = 0; i < tail.rank; i++) tail.dim[i] = x->dim[n->a.axis + i];
  for (int i = 1; i < n->nin; i++)
    if (!shape_eq(&IN(i)->shape, &tail))
      return FAIL("%s: %s must be %s (x.shape[%d:] of %s), got %s", OPNAME, i == 1 ? "gamma" : "beta", shape_str(&tail),
                  n->a.axis, SH(0), SH(i));
  n->shape = *x;
  n->dtype = DT_F32;
  return true;
}
#define shape_LAYERNORM shape_norm
#define shape_RMSNORM shape_norm

/* batchnorm(x, mean, var, gamma, beta): x rank >= 2 with channels on dim 1, the four
 * statistics each [C]; eps finite and >= 0. out = x's shape, f32. */
static bool shape_BATCHNORM(Graph *g, Node *n, char *err, size_t errlen) {
  static const char *const what[] = {"x", "mean", "var", "gamma", "beta"};
  const Shape *x = &IN(0)->shape;
  if (x->rank < 2) return FAIL("batchnorm: x needs rank >= 2 (channels on dim 1), got %s", SH(0));
  if (!check_eps(n, err, errlen)) return false;
  Shape c = {1, {x->dim[1]}};
  for (int i = 1; i < 5; i++)
    if (!shape_eq(&IN(i)->shape, &c))
      return FAIL("batchnorm: %s must be %s (channels of x %s), got %s", what[i], shape_str(&c), SH(0), SH(i));
  n->shape = *x;
  n->dtype = DT_F32;
  return true;
}

/* ---- data movement ---- */

/* out takes the target a.reshape (fully resolved, no -1) if its dims are valid and its
 * element count equals in0's; dtype kept. */
static bool shape_RESHAPE(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *t = &n->a.reshape;
  if (!check_dims(n, t, "target shape", err, errlen)) return false;
  if (shape_numel(t) != shape_numel(&IN(0)->shape))
    return FAIL("reshape: %s has %lld elements, target %s has %lld", SH(0), (long long)shape_numel(&IN(0)->shape),
                shape_str(t), (long long)shape_numel(t));
  n->shape = *t;
  n->dtype = IN(0)->dtype;
  return true;
}

/* out.dim[i] = x.dim[a.perm[i]]; a.perm must be a permutation of 0..rank-1; dtype kept. */
static bool shape_TRANSPOSE(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  bool seen[KILN_MAX_RANK] = {false};
  for (int i = 0; i < x->rank; i++) {
    int p = n->a.perm[i];
    if (p < 0 || p >= x->rank || seen[p]) {
      char buf[64] = "";
      size_t k = 0;
      for (int j = 0; j < x->rank; j++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", j ? ", " : "", n->a.perm[j]);
      return FAIL("transpose: perm [%s] is not a permutation of the dims of %s", buf, SH(0));
    }
    seen[p] = true;
  }
  n->shape.rank = x->rank;
  for (int i = 0; i < x->rank; i++) n->shape.dim[i] = x->dim[n->a.perm[i]];
  n->dtype = IN(0)->dtype;
  return true;
}

/* Joins the inputs along a.axis: all share dtype and rank and agree on every other dim;
 * out.dim[axis] is the sum. */
static bool shape_CONCAT(Graph *g, Node *n, char *err, size_t errlen) {
  const Node *x = IN(0);
  int ax = n->a.axis;
  if (ax < 0 || ax >= x->shape.rank) return FAIL("concat: axis %d out of range for %s", ax, SH(0));
  Shape s = x->shape;
  for (int i = 1; i < n->nin; i++) {
    const Node *y = IN(i);
    if (y->dtype != x->dtype)
      return FAIL("concat: input %d is %s%s, input 0 is %s%s", i, dtype_name(y->dtype), SH(i), dtype_name(x->dtype), SH(0));
    bool ok = y->shape.rank == x->shape.rank;
    for (int d = 0; ok && d < s.rank; d++) ok = d == ax || y->shape.dim[d] == x->shape.dim[d];
    if (!ok) return FAIL("concat: shapes %s and %s differ outside axis %d", SH(0), SH(i), ax);
    s.dim[ax] += y->shape.dim[ax];
  }
  n->shape = s;
  n->dtype = x->dtype;
  return true;
}

/* Per dim, start:end:step with 0 <= start <= end <= dim and step > 0 (already normalised by
 * the tracer); out.dim = ceil((end - start) / step), which must not be 0. dtype kept. */
static bool shape_SLICE(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  const Attrs *a = &n->a;
  Shape s = {.rank = x->rank};
  for (int i = 0; i < x->rank; i++) {
    if (a->step[i] <= 0 || a->start[i] < 0 || a->start[i] > a->end[i] || a->end[i] > x->dim[i])
      return FAIL("slice: dim %d range %lld:%lld:%lld invalid for %s", i, (long long)a->start[i], (long long)a->end[i],
                  (long long)a->step[i], SH(0));
    s.dim[i] = a->end[i] > a->start[i] ? (a->end[i] - a->start[i] - 1) / a->step[i] + 1 : 0;  /* no overflow for any step */
    if (s.dim[i] == 0)
      return FAIL("slice: dim %d range %lld:%lld of %s is empty (Kiln has no empty tensors)", i, (long long)a->start[i],
                  (long long)a->end[i], SH(0));
  }
  n->shape = s;
  n->dtype = IN(0)->dtype;
  return true;
}

/* x indexed along a.axis by i32 indices: out = x.dims[:axis] + indices.dims + x.dims[axis+1:],
 * with x's dtype; fails when that rank exceeds KILN_MAX_RANK. */
static bool shape_GATHER(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *idx = &IN(1)->shape;
  int ax = n->a.axis;
  if (IN(1)->dtype != DT_I32) return FAIL("gather: indices must be i32, got %s%s", dtype_name(IN(1)->dtype), SH(1));
  if (ax < 0 || ax >= x->rank) return FAIL("gather: axis %d out of range for %s", ax, SH(0));
  if (x->rank - 1 + idx->rank > KILN_MAX_RANK)
    return FAIL("gather: result of %s by indices %s exceeds rank %d", SH(0), SH(1), KILN_MAX_RANK);
  Shape s = {0};
  for (int i = 0; i < ax; i++) s.dim[s.rank++] = x->dim[i];
  for (int i = 0; i < idx->rank; i++) s.dim[s.rank++] = idx->dim[i];
  for (int i = ax + 1; i < x->rank; i++) s.dim[s.rank++] = x->dim[i];
  n->shape = s;
  n->dtype = IN(0)->dtype;
  return true;
}

/* x (any dtype) indexed per element along a.axis by i32 y of x's rank whose other dims
 * equal x's (torch.gather without broadcasting: the frontend expands first); out has
 * y's shape and x's dtype. */
static bool shape_GATHER_ELEMENTS(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *idx = &IN(1)->shape;
  int ax = n->a.axis;
  if (IN(1)->dtype != DT_I32) return FAIL("gather_elements: indices must be i32, got %s%s", dtype_name(IN(1)->dtype), SH(1));
  if (ax < 0 || ax >= x->rank) return FAIL("gather_elements: axis %d out of range for %s", ax, SH(0));
  if (idx->rank != x->rank) return FAIL("gather_elements: indices %s must have the rank of x %s", SH(1), SH(0));
  for (int i = 0; i < x->rank; i++)
    if (i != ax && idx->dim[i] != x->dim[i])
      return FAIL("gather_elements: indices %s and x %s differ in dim %d (only dim %d may)", SH(1), SH(0), i, ax);
  n->shape = *idx;
  n->dtype = IN(0)->dtype;
  return true;
}

/* SCATTER (x, idx, src): idx i32 of x's rank with x's dims except along a.axis, src of
 * idx's shape and x's dtype. INDEX_COPY (x, idx, src): idx a 1-D i32 vector, src x's
 * shape with idx's length along a.axis, x's dtype. The result is x's type. */
static bool shape_scatter(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *idx = &IN(1)->shape, *src = &IN(2)->shape;
  int ax = n->a.axis;
  if (IN(1)->dtype != DT_I32) return FAIL("%s: indices must be i32, got %s%s", OPNAME, dtype_name(IN(1)->dtype), SH(1));
  if (IN(2)->dtype != IN(0)->dtype)
    return FAIL("%s: source %s%s must have x's dtype %s", OPNAME, dtype_name(IN(2)->dtype), SH(2), dtype_name(IN(0)->dtype));
  if (ax < 0 || ax >= x->rank) return FAIL("%s: axis %d out of range for %s", OPNAME, ax, SH(0));
  Shape want = *x;
  if (n->op == OP_SCATTER) {
    if (idx->rank != x->rank) return FAIL("scatter: indices %s must have the rank of x %s", SH(1), SH(0));
    want.dim[ax] = idx->dim[ax];
    if (!shape_eq(idx, &want))
      return FAIL("scatter: indices %s and x %s differ in a dim other than %d", SH(1), SH(0), ax);
  } else {
    if (idx->rank != 1) return FAIL("index_copy: indices must be a vector, got %s", SH(1));
    want.dim[ax] = idx->dim[0];
  }
  if (!shape_eq(src, &want)) return FAIL("%s: source %s must be %s (x %s, indices %s)", OPNAME, SH(2), shape_str(&want), SH(0), SH(1));
  n->shape = *x;
  n->dtype = IN(0)->dtype;
  return true;
}
#define shape_SCATTER shape_scatter
#define shape_INDEX_COPY shape_scatter

/* topk over a.axis of an f32 x: 1 <= a.k <= x.dim[axis]; out is x's shape with a.k
 * along the axis, i32 (indices). */
static bool shape_TOPK(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape;
  int ax = n->a.axis;
  if (ax < 0 || ax >= x->rank) return FAIL("topk: axis %d out of range for %s", ax, SH(0));
  if (n->a.k < 1 || n->a.k > x->dim[ax]) return FAIL("topk: k = %d is not in [1, %lld] for %s along dim %d", n->a.k, (long long)x->dim[ax], SH(0), ax);
  n->shape = *x;
  n->shape.dim[ax] = n->a.k;
  n->dtype = DT_I32;
  return true;
}

/* sdpa(q, k, v, len, pos): q [Hq, T, D], k and v [Hkv, S, D] with Hkv dividing Hq (grouped
 * heads), len and pos i32 scalars; out has q's shape. */
static bool shape_SDPA(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *q = &IN(0)->shape, *k = &IN(1)->shape, *v = &IN(2)->shape;
  for (int i = 0; i < 3; i++)
    if (IN(i)->dtype != DT_F32 || IN(i)->shape.rank != 3)
      return FAIL("sdpa: %s must be f32 of rank 3, got %s%s", i == 0 ? "q" : i == 1 ? "k" : "v", dtype_name(IN(i)->dtype), SH(i));
  for (int i = 3; i < 5; i++)
    if (IN(i)->dtype != DT_I32 || IN(i)->shape.rank != 0)
      return FAIL("sdpa: %s must be an i32 scalar, got %s%s", i == 3 ? "len" : "pos", dtype_name(IN(i)->dtype), SH(i));
  if (!shape_eq(k, v)) return FAIL("sdpa: k %s and v %s must have the same shape", SH(1), SH(2));
  if (q->dim[2] != k->dim[2]) return FAIL("sdpa: q %s and k %s differ in head size", SH(0), SH(1));
  if (q->dim[0] % k->dim[0] != 0)
    return FAIL("sdpa: q's %lld heads are not a multiple of k's %lld (grouped-query attention)", (long long)q->dim[0],
                (long long)k->dim[0]);
  if (!(n->a.scale > 0) || isinf(n->a.scale)) return FAIL("sdpa: scale must be a positive number, got %g", (double)n->a.scale);
  if (n->a.window < 0 || (n->a.window > 0 && !n->a.causal))
    return FAIL("sdpa: window %d must be 0 or positive, and causal", n->a.window);
  n->shape = *q;
  n->dtype = DT_F32;
  return true;
}

/* write(x, y, at): y fits in x at some offset along a.axis: same rank and dtype, every
 * other dim equal, no longer than x along the axis; at is an i32 scalar. The result is
 * the new version of x (its dtype and shape). The offset's range is a run-time matter. */
static bool shape_WRITE(Graph *g, Node *n, char *err, size_t errlen) {
  const Shape *x = &IN(0)->shape, *y = &IN(1)->shape;
  int ax = n->a.axis;
  if (x->rank == 0) return FAIL("write: cannot write into a scalar");
  if (ax < 0 || ax >= x->rank) return FAIL("write: axis %d out of range for %s", ax, SH(0));
  if (IN(1)->dtype != IN(0)->dtype)
    return FAIL("write: value is %s%s, the state is %s%s", dtype_name(IN(1)->dtype), SH(1), dtype_name(IN(0)->dtype), SH(0));
  if (IN(2)->dtype != DT_I32 || IN(2)->shape.rank != 0)
    return FAIL("write: the offset must be an i32 scalar, got %s%s", dtype_name(IN(2)->dtype), SH(2));
  bool fits = y->rank == x->rank;
  for (int i = 0; fits && i < x->rank; i++) fits = i == ax ? y->dim[i] <= x->dim[i] : y->dim[i] == x->dim[i];
  if (!fits) return FAIL("write: value %s does not fit state %s along axis %d (other dims must be equal)", SH(1), SH(0), ax);
  n->shape = *x;
  n->dtype = IN(0)->dtype;
  return true;
}

/* ---- the table and the shared checks ---- */

typedef bool ShapeRule(Graph *g, Node *n, char *err, size_t errlen);
static ShapeRule *const rules[OP__COUNT] = {
#define X(id, nm, mi, ma, fam, fl, ex, iex, dc) [OP_##id] = shape_##id,
    KILN_OPS(X)
#undef X
};

/* Arity from the op table, in-range input ids, f32 operands for OPF_F32 ops (all f32 or
 * all i32 for those with an i32 expression). */
static bool check_inputs(Graph *g, Node *n, char *err, size_t errlen) {
  const OpInfo *o = &kiln_ops[n->op];
  if (n->nin < o->min_in || (o->max_in >= 0 && n->nin > o->max_in)) {
    const char *s = o->min_in == 1 ? "" : "s";
    if (o->max_in < 0) return FAIL("%s: takes at least %d input%s, got %d", o->name, o->min_in, s, n->nin);
    if (o->min_in == o->max_in) return FAIL("%s: takes %d input%s, got %d", o->name, o->min_in, s, n->nin);
    return FAIL("%s: takes %d to %d inputs, got %d", o->name, o->min_in, o->max_in, n->nin);
  }
  for (int i = 0; i < n->nin; i++) {
    if (n->in[i] < 0 || n->in[i] >= g->nnodes)
      die("%s: input %d names node %d (graph has %d)", o->name, i, n->in[i], g->nnodes);
    if ((o->flags & OPF_F32) && !o->iexpr && IN(i)->dtype != DT_F32)
      return FAIL("%s: operands must be f32, input %d is %s%s", o->name, i, dtype_name(IN(i)->dtype), SH(i));
    if ((o->flags & OPF_F32) && o->iexpr && IN(i)->dtype != IN(0)->dtype)
      return FAIL("%s: operands must be all f32 or all i32, input 0 is %s%s and input %d is %s%s (cast one)", o->name,
                  dtype_name(IN(0)->dtype), SH(0), i, dtype_name(IN(i)->dtype), SH(i));
    if ((o->flags & OPF_F32) && o->iexpr && IN(i)->dtype == DT_BOOL)
      return FAIL("%s: operands must be f32 or i32, input %d is bool%s", o->name, i, SH(i));
    if (IN(i)->dtype == DT_I64 && n->op != OP_CAST)   /* an i64 input's only reader is its cast to i32 */
      return FAIL("%s: input %d is i64%s, which only a cast to i32 may read", o->name, i, SH(i));
  }
  return true;
}

/* Sets n->shape and n->dtype from its inputs by the op's rule, after checking arity and
 * operand dtypes; comparison ops become bool. Returns false with a user-facing message in
 * err (no location; the caller adds it); dies on a bad op or input id, which are Kiln bugs. */
bool shape_infer(Graph *g, Node *n, char *err, size_t errlen) {
  if ((int)n->op < 0 || n->op >= OP__COUNT) die("shape_infer: bad op %d", (int)n->op);
  if (kiln_ops[n->op].family != FAM_LEAF && !check_inputs(g, n, err, errlen)) return false;
  if (!rules[n->op](g, n, err, errlen)) return false;
  if (kiln_ops[n->op].flags & OPF_CMP) n->dtype = DT_BOOL;
  if (n->shape.rank > KILN_MAX_RANK) return FAIL("%s: result rank %d exceeds %d", OPNAME, n->shape.rank, KILN_MAX_RANK);
  if (shape_numel_checked(&n->shape) < 0)   /* broadcasting, matmul, gather, conv padding can grow a result */
    return FAIL("%s: the result %s has more than %d elements, Kiln's limit per tensor", OPNAME, shape_str(&n->shape),
                KILN_MAX_NUMEL);
  return true;
}
