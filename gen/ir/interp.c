/*
 * interp.c — the reference interpreter: the oracle every target is checked against.
 *
 * Each op is one small function written straight from its semantics in ops.h,
 * with no code shared with any emitter, so a bug in a kernel template cannot hide
 * by being repeated here. The table of functions is built from the KILN_OPS
 * X-macro (interp_<ID>), so a missing entry is a compile error.
 *
 * Deliberately naive: every output element is computed from a multi-index, with
 * broadcasting resolved per element. Elementwise math is done in double and
 * rounded once to f32 (for + - * / this is exactly the f32 result); sums, dot
 * products, convolutions and norm statistics accumulate in double.
 * Data-dependent errors (a gather index outside [0, n)) return false with a
 * message that starts with the user's file:line.
 */
#include "kiln.h"

#include <math.h>
#include <string.h>

typedef bool InterpFn(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen);

/* ---- indexing helpers ---- */

/* Row-major multi-index of flat position i within shape s. */
static void unravel(int64_t i, const Shape *s, int64_t *idx) {
  for (int d = s->rank - 1; d >= 0; d--) {
    idx[d] = i % s->dim[d];
    i /= s->dim[d];
  }
}

/* Flat position of multi-index idx within shape s. */
static int64_t ravel(const int64_t *idx, const Shape *s) {
  int64_t off = 0;
  for (int d = 0; d < s->rank; d++) off = off * s->dim[d] + idx[d];
  return off;
}

/* Flat position in a broadcast operand of shape s of the output multi-index idx (rank out_rank). */
static int64_t bcast_offset(const Shape *s, const int64_t *idx, int out_rank) {
  int64_t off = 0;
  for (int d = 0; d < s->rank; d++) {
    int64_t i = idx[out_rank - s->rank + d];
    off = off * s->dim[d] + (s->dim[d] == 1 ? 0 : i);
  }
  return off;
}

/* Walks an output's elements in row-major order and, in step, the matching element of
 * up to three broadcast operands: what unravel + bcast_offset give per element, without a
 * division per element (elementwise ops over big batches spent most of their time there). */
typedef struct {
  const Shape *out;
  int n;                                    /* operands */
  int64_t idx[KILN_MAX_RANK];               /* the output's multi-index */
  int64_t stride[3][KILN_MAX_RANK];         /* per operand, per output dim; 0 where broadcast */
  int64_t off[3];                           /* each operand's flat position now */
} Bcast;

/* Starts b at the output's first element for operands of shapes s[0..n). */
static void bcast_start(Bcast *b, const Shape *out, const Shape *const *s, int n) {
  b->out = out, b->n = n;
  for (int k = 0; k < n; k++) {
    int64_t m = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
      int sd = d - (out->rank - s[k]->rank);
      b->stride[k][d] = sd >= 0 && s[k]->dim[sd] != 1 ? m : 0;
      if (sd >= 0) m *= s[k]->dim[sd];
    }
    b->off[k] = 0;
  }
  for (int d = 0; d < out->rank; d++) b->idx[d] = 0;
}

/* Moves b to the next output element (an odometer over the output's dims). */
static void bcast_next(Bcast *b) {
  for (int d = b->out->rank - 1; d >= 0; d--) {
    for (int k = 0; k < b->n; k++) b->off[k] += b->stride[k][d];
    if (++b->idx[d] < b->out->dim[d]) return;
    for (int k = 0; k < b->n; k++) b->off[k] -= b->stride[k][d] * b->out->dim[d];
    b->idx[d] = 0;
  }
}

/* Typed views of a tensor's data; the caller knows the dtype is f32. */
static float f32_at(const Tensor *t, int64_t i) { return ((const float *)t->data)[i]; }
static float *f32_out(Tensor *t) { return (float *)t->data; }

/* Product of dims [from, to) of s. */
static int64_t dims_prod(const Shape *s, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++) p *= s->dim[d];
  return p;
}

/* ---- elementwise ---- */

/* The scalar function of a unary or binary f32 op, in double. */
static double scalar(OpKind op, double x, double y) {
  switch (op) {
  case OP_ADD: return x + y;
  case OP_SUB: return x - y;
  case OP_MUL: return x * y;
  case OP_DIV: return x / y;
  case OP_POW: return pow(x, y);
  case OP_MAX: return fmax(x, y);
  case OP_MIN: return fmin(x, y);
  case OP_FMOD: return fmod(x, y);   /* exact: the result is representable */
  case OP_REMAINDER: {
    double r = fmod(x, y);
    return r != 0.0 && (r < 0.0) != (y < 0.0) ? r + y : r;
  }
  case OP_EQ: return x == y;
  case OP_NE: return x != y;
  case OP_LT: return x < y;
  case OP_LE: return x <= y;
  case OP_GT: return x > y;
  case OP_GE: return x >= y;
  case OP_NEG: return -x;
  case OP_ABS: return fabs(x);
  case OP_EXP: return exp(x);
  case OP_LOG: return log(x);
  case OP_SQRT: return sqrt(x);
  case OP_RSQRT: return 1.0 / sqrt(x);
  case OP_TANH: return tanh(x);
  case OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case OP_RELU: return x > 0.0 ? x : 0.0;
  case OP_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case OP_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  case OP_SILU: return x / (1.0 + exp(-x));
  case OP_SIN: return sin(x);
  case OP_COS: return cos(x);
  case OP_ERF: return erf(x);
  case OP_FLOOR: return floor(x);
  case OP_CEIL: return ceil(x);
  case OP_ROUND: return nearbyint(x);   /* the default rounding mode: halves to even */
  case OP_ROUND_F16: return kiln_round_f16((float)x);   /* x is an f32 value: exact */
  default: die("interp: %s is not a scalar op", kiln_ops[op].name);
  }
}

/* v modulo 2^32 as a two's-complement int32, without implementation-defined casts. */
static int32_t wrap32(int64_t v) {
  uint32_t u = (uint32_t)((uint64_t)v & 0xffffffffu);
  return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 0x80000000u) - INT32_MAX - 1;
}

/* The i32 ops (the op table's iexpr) exactly, wrapped by the caller: what i32(i64(x) + y)
 * computes on every target. Sums, differences, negations, max/min and comparisons of
 * int32 values are exact in double (|result| < 2^33, far below 2^53), so scalar() does
 * them; only a product (up to 2^62) needs 64-bit integers. */
static int64_t iscalar(OpKind op, int64_t x, int64_t y) {
  if (!kiln_ops[op].iexpr) die("interp: %s has no i32 form", kiln_ops[op].name);
  if (op == OP_FMOD) return y == 0 ? 0 : x % y;                  /* C's %: truncating, as fmod */
  if (op == OP_REMAINDER) return y == 0 ? 0 : (x % y + y) % y;   /* the sign of y */
  return op == OP_MUL ? x * y : (int64_t)scalar(op, (double)x, (double)y);
}

/* Elementwise binary op with broadcasting, in double then rounded to f32 (i32 operands:
 * in 64-bit integers, then wrapped); comparison ops store 0/1 bytes. Cannot fail. */
static bool interp_binary(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  int64_t count = shape_numel(&out->shape);
  bool cmp = kiln_ops[n->op].flags & OPF_CMP;
  Bcast b;
  bcast_start(&b, &out->shape, (const Shape *[]){&in[0].shape, &in[1].shape}, 2);
  for (int64_t i = 0; i < count; i++, bcast_next(&b)) {
    if (in[0].dtype == DT_I32) {
      int64_t x = ((const int32_t *)in[0].data)[b.off[0]];
      int64_t y = ((const int32_t *)in[1].data)[b.off[1]];
      int64_t r = iscalar(n->op, x, y);
      if (cmp) ((uint8_t *)out->data)[i] = r != 0;
      else ((int32_t *)out->data)[i] = wrap32(r);
      continue;
    }
    double r = scalar(n->op, f32_at(&in[0], b.off[0]), f32_at(&in[1], b.off[1]));
    if (cmp) ((uint8_t *)out->data)[i] = r != 0.0;
    else f32_out(out)[i] = (float)r;
  }
  return true;
}
#define interp_ADD interp_binary
#define interp_SUB interp_binary
#define interp_MUL interp_binary
#define interp_DIV interp_binary
#define interp_POW interp_binary
#define interp_MAX interp_binary
#define interp_MIN interp_binary
#define interp_FMOD interp_binary
#define interp_REMAINDER interp_binary
#define interp_EQ interp_binary
#define interp_NE interp_binary
#define interp_LT interp_binary
#define interp_LE interp_binary
#define interp_GT interp_binary
#define interp_GE interp_binary

/* Elementwise unary op through scalar(), computed in double and rounded once (i32:
 * iscalar, wrapped). Cannot fail. */
static bool interp_unary(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  int64_t count = shape_numel(&out->shape);
  if (in[0].dtype == DT_I32) {
    for (int64_t i = 0; i < count; i++)
      ((int32_t *)out->data)[i] = wrap32(iscalar(n->op, ((const int32_t *)in[0].data)[i], 0));
    return true;
  }
  for (int64_t i = 0; i < count; i++) f32_out(out)[i] = (float)scalar(n->op, f32_at(&in[0], i), 0.0);
  return true;
}
#define interp_NEG interp_unary
#define interp_ABS interp_unary
#define interp_EXP interp_unary
#define interp_LOG interp_unary
#define interp_SQRT interp_unary
#define interp_RSQRT interp_unary
#define interp_TANH interp_unary
#define interp_SIGMOID interp_unary
#define interp_RELU interp_unary
#define interp_GELU interp_unary
#define interp_GELU_TANH interp_unary
#define interp_SILU interp_unary
#define interp_SIN interp_unary
#define interp_COS interp_unary
#define interp_ERF interp_unary
#define interp_FLOOR interp_unary
#define interp_CEIL interp_unary
#define interp_ROUND interp_unary
#define interp_ROUND_F16 interp_unary

/* WHERE: any dtype for the branches, so elements move as bytes. */
static bool interp_WHERE(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)n, (void)err, (void)errlen;
  int64_t count = shape_numel(&out->shape);
  size_t es = (size_t)dtype_size(out->dtype);
  Bcast b;
  bcast_start(&b, &out->shape, (const Shape *[]){&in[0].shape, &in[1].shape, &in[2].shape}, 3);
  for (int64_t i = 0; i < count; i++, bcast_next(&b)) {
    int k = ((const uint8_t *)in[0].data)[b.off[0]] != 0 ? 1 : 2;
    memcpy((char *)out->data + (size_t)i * es, (const char *)in[k].data + (size_t)b.off[k] * es, es);
  }
  return true;
}

/* f32 -> i32 truncates toward zero; NaN gives 0 and out-of-range values saturate
 * (kernels leave those undefined, as C does). To bool: x != 0. */
static int32_t f32_to_i32(float v) {
  if (isnan(v)) return 0;
  if (v >= 2147483647.0f) return INT32_MAX;
  if (v <= -2147483648.0f) return INT32_MIN;
  return (int32_t)v;
}

/* An i64 input narrowed to i32 (the cast kiln.input adds): a value outside the i32
 * range is an error naming the input and the element, as the C entry's E_RANGE. */
static bool cast_i64(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  int64_t count = shape_numel(&out->shape);
  for (int64_t i = 0; i < count; i++) {
    int64_t v = ((const int64_t *)in[0].data)[i];
    if (v < INT32_MIN || v > INT32_MAX) {
      snprintf(err, errlen, "%s:%d: i64 input value %lld (element %lld) is outside the i32 range", n->loc.file ? n->loc.file : "?",
               n->loc.line, (long long)v, (long long)i);
      return false;
    }
    ((int32_t *)out->data)[i] = (int32_t)v;
  }
  return true;
}

/* Converts each element to out's dtype: to bool is "!= 0", f32 -> i32 truncates and
 * saturates (f32_to_i32, NaN -> 0), other conversions are plain C; an i64 input's
 * value outside the i32 range is the one failure (cast_i64). */
static bool interp_CAST(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  int64_t count = shape_numel(&out->shape);
  if (in[0].dtype == DT_I64) return cast_i64(n, in, out, err, errlen);
  for (int64_t i = 0; i < count; i++) {
    double v = in[0].dtype == DT_F32 ? f32_at(&in[0], i)
               : in[0].dtype == DT_I32 ? ((const int32_t *)in[0].data)[i]
                                       : ((const uint8_t *)in[0].data)[i];
    if (out->dtype == DT_F32) f32_out(out)[i] = (float)v;
    else if (out->dtype == DT_BOOL) ((uint8_t *)out->data)[i] = v != 0.0;
    else if (in[0].dtype == DT_F32) ((int32_t *)out->data)[i] = f32_to_i32((float)v);
    else ((int32_t *)out->data)[i] = (int32_t)v;
  }
  return true;
}

/* COPY and RESHAPE: the same bytes (a view is a plain copy here). */
static bool interp_same_bytes(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)n, (void)err, (void)errlen;
  memcpy(out->data, in[0].data, (size_t)(shape_numel(&out->shape) * dtype_size(out->dtype)));
  return true;
}
#define interp_COPY interp_same_bytes
#define interp_RESHAPE interp_same_bytes

/* ---- contractions and windows ---- */

/* Batched x @ y with broadcast batch dims and optional transposes, accumulating each dot
 * product in double: the reference the emitted kernels are compared against. Cannot fail. */
static bool interp_MATMUL(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Shape *xs = &in[0].shape, *ys = &in[1].shape, *os = &out->shape;
  int r = os->rank;
  int64_t M = os->dim[r - 2], N = os->dim[r - 1];
  int64_t K = n->a.trans_x ? xs->dim[xs->rank - 2] : xs->dim[xs->rank - 1];
  int64_t xr = xs->dim[xs->rank - 2], xc = xs->dim[xs->rank - 1], yr = ys->dim[ys->rank - 2], yc = ys->dim[ys->rank - 1];
  Shape xb = *xs, yb = *ys, ob = *os;
  xb.rank -= 2, yb.rank -= 2, ob.rank -= 2;
  int64_t batches = shape_numel(&ob), idx[KILN_MAX_RANK];
  for (int64_t b = 0; b < batches; b++) {
    unravel(b, &ob, idx);
    const float *x = (const float *)in[0].data + bcast_offset(&xb, idx, ob.rank) * xr * xc;
    const float *y = (const float *)in[1].data + bcast_offset(&yb, idx, ob.rank) * yr * yc;
    float *o = f32_out(out) + b * M * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; k++) {
          double xv = n->a.trans_x ? x[k * xc + i] : x[i * xc + k];
          double yv = n->a.trans_y ? y[j * yc + k] : y[k * yc + j];
          acc += xv * yv;
        }
        o[i * N + j] = (float)acc;
      }
  }
  return true;
}

/* Direct NCHW convolution with groups, stride, dilation and zero padding (out-of-range taps
 * skipped), bias added first, accumulated in double: each output's sum is bias, then its taps
 * in (ic, kh, kw) order. Four filters of a group are summed side by side (one input read, four
 * independent chains; fewer where a group has fewer left), which changes no output's order of
 * additions. Cannot fail. */
enum { CONV_OC_BLOCK = 4 };
static bool interp_CONV2D(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Attrs *a = &n->a;
  const Shape *xs = &in[0].shape, *ws = &in[1].shape, *os = &out->shape;
  int64_t C = xs->dim[1], H = xs->dim[2], W = xs->dim[3];
  int64_t O = ws->dim[0], CG = ws->dim[1], KH = ws->dim[2], KW = ws->dim[3];
  int64_t OG = O / a->groups, OH = os->dim[2], OW = os->dim[3];
  const float *x = in[0].data, *w = in[1].data, *bias = n->nin == 3 ? in[2].data : NULL;
  float *o = f32_out(out);
  for (int64_t b = 0; b < os->dim[0]; b++)
    for (int64_t oc0 = 0, end; oc0 < O; oc0 = end) {
      int64_t g = oc0 / OG;
      end = oc0 + CONV_OC_BLOCK < (g + 1) * OG ? oc0 + CONV_OC_BLOCK : (g + 1) * OG;
      int nb = (int)(end - oc0);
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc[CONV_OC_BLOCK];
          for (int j = 0; j < nb; j++) acc[j] = bias ? bias[oc0 + j] : 0.0;
          for (int64_t ic = 0; ic < CG; ic++)
            for (int64_t kh = 0; kh < KH; kh++) {
              int64_t ih = oh * a->stride[0] - a->pad[0] + kh * a->dilation[0];
              if (ih < 0 || ih >= H) continue;
              const float *xrow = x + ((b * C + g * CG + ic) * H + ih) * W;
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t iw = ow * a->stride[1] - a->pad[1] + kw * a->dilation[1];
                if (iw < 0 || iw >= W) continue;
                double xv = xrow[iw];
                for (int j = 0; j < nb; j++) acc[j] += xv * w[(((oc0 + j) * CG + ic) * KH + kh) * KW + kw];
              }
            }
          for (int j = 0; j < nb; j++) o[((b * O + oc0 + j) * OH + oh) * OW + ow] = (float)acc[j];
        }
    }
  return true;
}

/* Transposed convolution written the other way round from the kernels: every input
 * element scatters x * w into the outputs it reaches (a float64 accumulator per
 * output), which kernels compute as a gather. Cannot fail. */
static bool interp_CONV_TRANSPOSE2D(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Attrs *a = &n->a;
  const Shape *xs = &in[0].shape, *ws = &in[1].shape, *os = &out->shape;
  int64_t C = xs->dim[1], H = xs->dim[2], W = xs->dim[3], CG = C / a->groups;
  int64_t OG = ws->dim[1], KH = ws->dim[2], KW = ws->dim[3], O = OG * a->groups, OH = os->dim[2], OW = os->dim[3];
  const float *x = in[0].data, *w = in[1].data, *bias = n->nin == 3 ? in[2].data : NULL;
  int64_t count = shape_numel(os);
  double *acc = kiln_alloc(sizeof(double) * (size_t)count);
  for (int64_t b = 0; b < xs->dim[0]; b++)
    for (int64_t ic = 0; ic < C; ic++)
      for (int64_t ih = 0; ih < H; ih++)
        for (int64_t iw = 0; iw < W; iw++) {
          double v = x[((b * C + ic) * H + ih) * W + iw];
          for (int64_t j = 0; j < OG; j++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t oh = ih * a->stride[0] - a->pad[0] + kh * a->dilation[0];
                int64_t ow = iw * a->stride[1] - a->pad[1] + kw * a->dilation[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                int64_t oc = ic / CG * OG + j;
                acc[((b * O + oc) * OH + oh) * OW + ow] += v * w[((ic * OG + j) * KH + kh) * KW + kw];
              }
        }
  float *o = f32_out(out);
  for (int64_t i = 0; i < count; i++) o[i] = (float)(acc[i] + (bias ? bias[i / (OH * OW) % O] : 0.0));
  return true;
}

/* Max or mean over each window; padded positions never take part in a max, and
 * count in a mean's divisor only with a.count_pad. */
static bool interp_pool(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Attrs *a = &n->a;
  const Shape *xs = &in[0].shape, *os = &out->shape;
  int64_t H = xs->dim[2], W = xs->dim[3];
  const float *x = in[0].data;
  float *o = f32_out(out);
  for (int64_t bc = 0; bc < xs->dim[0] * xs->dim[1]; bc++)
    for (int64_t oh = 0; oh < os->dim[2]; oh++)
      for (int64_t ow = 0; ow < os->dim[3]; ow++) {
        double acc = n->op == OP_MAXPOOL2D ? -INFINITY : 0.0;
        int64_t count = 0;
        for (int kh = 0; kh < a->kernel[0]; kh++)
          for (int kw = 0; kw < a->kernel[1]; kw++) {
            int64_t ih = oh * a->stride[0] - a->pad[0] + kh, iw = ow * a->stride[1] - a->pad[1] + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            double v = x[(bc * H + ih) * W + iw];
            if (n->op == OP_MAXPOOL2D) acc = (v > acc || isnan(v)) ? v : acc;
            else acc += v;
            count++;
          }
        if (n->op == OP_AVGPOOL2D) acc /= a->count_pad ? (double)a->kernel[0] * a->kernel[1] : (double)count;
        o[(bc * os->dim[2] + oh) * os->dim[3] + ow] = (float)acc;
      }
  return true;
}
#define interp_MAXPOOL2D interp_pool
#define interp_AVGPOOL2D interp_pool

/* ---- reductions and normalisations ---- */

/* The accumulator of a reduction before any element: the identity of its update. */
static double reduce_init(OpKind op) {
  switch (op) {
  case OP_REDUCE_MAX: return -INFINITY;
  case OP_REDUCE_MIN: return INFINITY;
  case OP_REDUCE_PROD: return 1.0;
  default: return 0.0;
  }
}

/* acc updated with element v: a NaN, once in a max or min, stays (torch.amax/amin). */
static double reduce_step(OpKind op, double acc, double v) {
  switch (op) {
  case OP_REDUCE_MAX: return !isnan(acc) && (isnan(v) || v > acc) ? v : acc;
  case OP_REDUCE_MIN: return !isnan(acc) && (isnan(v) || v < acc) ? v : acc;
  case OP_REDUCE_PROD: return acc * v;
  default: return acc + v;
  }
}

/* Sum, mean, max, min or product over the a.axes dims, in double. */
static bool interp_reduce(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Shape *xs = &in[0].shape;
  int64_t ocount = shape_numel(&out->shape), icount = shape_numel(xs), idx[KILN_MAX_RANK];
  double *acc = kiln_alloc(sizeof(double) * (size_t)ocount);
  for (int64_t j = 0; j < ocount; j++) acc[j] = reduce_init(n->op);
  Shape kept = *xs;   /* x's shape with reduced dims set to 1: indexes acc */
  for (int d = 0; d < xs->rank; d++)
    if (n->a.axes & (1u << d)) kept.dim[d] = 1;
  for (int64_t i = 0; i < icount; i++) {
    unravel(i, xs, idx);
    for (int d = 0; d < xs->rank; d++)
      if (n->a.axes & (1u << d)) idx[d] = 0;
    int64_t j = ravel(idx, &kept);
    acc[j] = reduce_step(n->op, acc[j], f32_at(&in[0], i));
  }
  double per = (double)icount / (double)ocount;
  for (int64_t j = 0; j < ocount; j++) f32_out(out)[j] = (float)(n->op == OP_REDUCE_MEAN ? acc[j] / per : acc[j]);
  return true;
}
#define interp_REDUCE_SUM interp_reduce
#define interp_REDUCE_MEAN interp_reduce
#define interp_REDUCE_MAX interp_reduce
#define interp_REDUCE_MIN interp_reduce
#define interp_REDUCE_PROD interp_reduce

/* Argmax/argmin along a.axis: per line, the first index holding the extreme, or the
 * first NaN (torch: a NaN is larger and smaller than everything). Cannot fail. */
static bool interp_argreduce(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  int64_t outer = 1, len = in[0].shape.dim[n->a.axis], inner = 1;
  for (int d = 0; d < n->a.axis; d++) outer *= in[0].shape.dim[d];
  for (int d = n->a.axis + 1; d < in[0].shape.rank; d++) inner *= in[0].shape.dim[d];
  int32_t *o = (int32_t *)out->data;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      int64_t best = 0;
      for (int64_t i = 1; i < len; i++) {
        double v = f32_at(&in[0], (a * len + i) * inner + c), b = f32_at(&in[0], (a * len + best) * inner + c);
        bool wins = n->op == OP_ARGMAX ? v > b : v < b;
        if (!isnan(b) && (isnan(v) || wins)) best = i;
      }
      o[a * inner + c] = (int32_t)best;
    }
  return true;
}
#define interp_ARGMAX interp_argreduce
#define interp_ARGMIN interp_argreduce

/* Softmax along a.axis, max-subtracted for stability, in double. Cannot fail. */
static bool interp_SOFTMAX(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Shape *s = &in[0].shape;
  int ax = n->a.axis;
  int64_t outer = dims_prod(s, 0, ax), len = s->dim[ax], inner = dims_prod(s, ax + 1, s->rank);
  const float *x = in[0].data;
  float *o = f32_out(out);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) {
      const float *xv = x + a * len * inner + b;
      float *ov = o + a * len * inner + b;
      double mx = -INFINITY, sum = 0.0;
      for (int64_t k = 0; k < len; k++) mx = fmax(mx, xv[k * inner]);
      for (int64_t k = 0; k < len; k++) sum += exp(xv[k * inner] - mx);
      for (int64_t k = 0; k < len; k++) ov[k * inner] = (float)(exp(xv[k * inner] - mx) / sum);
    }
  return true;
}

/* LAYERNORM: (x - mean) / sqrt(var + eps) [* gamma [+ beta]], biased variance.
 * RMSNORM: x / sqrt(mean(x^2) + eps) [* gamma]. Both over dims a.axis..rank-1. */
static bool interp_norm(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Shape *s = &in[0].shape;
  int64_t outer = dims_prod(s, 0, n->a.axis), len = dims_prod(s, n->a.axis, s->rank);
  const float *gamma = n->nin > 1 ? in[1].data : NULL, *beta = n->nin > 2 ? in[2].data : NULL;
  for (int64_t r = 0; r < outer; r++) {
    const float *x = (const float *)in[0].data + r * len;
    float *o = f32_out(out) + r * len;
    double mean = 0.0, var = 0.0;
    if (n->op == OP_LAYERNORM) {
      for (int64_t k = 0; k < len; k++) mean += x[k];
      mean /= (double)len;
    }
    for (int64_t k = 0; k < len; k++) var += (x[k] - mean) * (x[k] - mean);
    var /= (double)len;
    double inv = 1.0 / sqrt(var + (double)n->a.eps);
    for (int64_t k = 0; k < len; k++) {
      double v = (x[k] - mean) * inv;
      if (gamma) v *= gamma[k];
      if (beta) v += beta[k];
      o[k] = (float)v;
    }
  }
  return true;
}
#define interp_LAYERNORM interp_norm
#define interp_RMSNORM interp_norm

/* Inference batchnorm: (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c], channel on dim 1. */
static bool interp_BATCHNORM(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const Shape *s = &in[0].shape;
  int64_t N = s->dim[0], C = s->dim[1], inner = dims_prod(s, 2, s->rank);
  const float *x = in[0].data, *mean = in[1].data, *var = in[2].data, *gamma = in[3].data, *beta = in[4].data;
  for (int64_t b = 0; b < N; b++)
    for (int64_t c = 0; c < C; c++) {
      double inv = 1.0 / sqrt((double)var[c] + (double)n->a.eps);
      for (int64_t k = 0; k < inner; k++) {
        int64_t i = (b * C + c) * inner + k;
        f32_out(out)[i] = (float)((x[i] - (double)mean[c]) * inv * gamma[c] + beta[c]);
      }
    }
  return true;
}

/* ---- data movement (any dtype: elements move as bytes) ---- */

/* out[i0..] = x[indices permuted by a.perm]; any dtype, elements copied as bytes. */
static bool interp_TRANSPOSE(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  size_t es = (size_t)dtype_size(out->dtype);
  int64_t count = shape_numel(&out->shape), oidx[KILN_MAX_RANK], iidx[KILN_MAX_RANK];
  for (int64_t i = 0; i < count; i++) {
    unravel(i, &out->shape, oidx);
    for (int d = 0; d < out->shape.rank; d++) iidx[n->a.perm[d]] = oidx[d];
    memcpy((char *)out->data + (size_t)i * es, (const char *)in[0].data + (size_t)ravel(iidx, &in[0].shape) * es, es);
  }
  return true;
}

/* Each output element copied from the input whose stretch of a.axis covers it; any dtype. */
static bool interp_CONCAT(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  size_t es = (size_t)dtype_size(out->dtype);
  int64_t count = shape_numel(&out->shape), idx[KILN_MAX_RANK];
  for (int64_t i = 0; i < count; i++) {
    unravel(i, &out->shape, idx);
    int k = 0;
    while (idx[n->a.axis] >= in[k].shape.dim[n->a.axis]) idx[n->a.axis] -= in[k++].shape.dim[n->a.axis];
    memcpy((char *)out->data + (size_t)i * es, (const char *)in[k].data + (size_t)ravel(idx, &in[k].shape) * es, es);
  }
  return true;
}

/* out[i] = x[start + i * step] per dim (attrs already normalised and in range); any dtype. */
static bool interp_SLICE(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  size_t es = (size_t)dtype_size(out->dtype);
  int64_t count = shape_numel(&out->shape), idx[KILN_MAX_RANK];
  for (int64_t i = 0; i < count; i++) {
    unravel(i, &out->shape, idx);
    for (int d = 0; d < out->shape.rank; d++) idx[d] = n->a.start[d] + idx[d] * n->a.step[d];
    memcpy((char *)out->data + (size_t)i * es, (const char *)in[0].data + (size_t)ravel(idx, &in[0].shape) * es, es);
  }
  return true;
}

/* out[pre, j..., post] = x[pre, indices[j...], post]; an index outside [0, n) is an error. */
static bool interp_GATHER(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  size_t es = (size_t)dtype_size(out->dtype);
  int ax = n->a.axis, ir = in[1].shape.rank;
  int64_t count = shape_numel(&out->shape), oidx[KILN_MAX_RANK], xidx[KILN_MAX_RANK], jidx[KILN_MAX_RANK];
  int64_t limit = in[0].shape.dim[ax];
  for (int64_t i = 0; i < count; i++) {
    unravel(i, &out->shape, oidx);
    for (int d = 0; d < ir; d++) jidx[d] = oidx[ax + d];
    int32_t v = ((const int32_t *)in[1].data)[ravel(jidx, &in[1].shape)];
    if (v < 0 || v >= limit) {
      snprintf(err, errlen, "%s:%d: gather: index %d out of range [0, %lld) for %s", n->loc.file ? n->loc.file : "?",
               n->loc.line, (int)v, (long long)limit, shape_str(&in[0].shape));
      return false;
    }
    for (int d = 0; d < ax; d++) xidx[d] = oidx[d];
    xidx[ax] = v;
    for (int d = ax + 1; d < in[0].shape.rank; d++) xidx[d] = oidx[d - 1 + ir];
    memcpy((char *)out->data + (size_t)i * es, (const char *)in[0].data + (size_t)ravel(xidx, &in[0].shape) * es, es);
  }
  return true;
}

/* out[..i..] = x[..y[..i..]..] along a.axis (same rank, other dims equal); an index
 * outside [0, n) is an error. */
static bool interp_GATHER_ELEMENTS(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  size_t es = (size_t)dtype_size(out->dtype);
  int ax = n->a.axis;
  int64_t count = shape_numel(&out->shape), idx[KILN_MAX_RANK], limit = in[0].shape.dim[ax];
  for (int64_t i = 0; i < count; i++) {
    int32_t v = ((const int32_t *)in[1].data)[i];
    if (v < 0 || v >= limit) {
      snprintf(err, errlen, "%s:%d: gather_elements: index %d out of range [0, %lld) for %s", n->loc.file ? n->loc.file : "?",
               n->loc.line, (int)v, (long long)limit, shape_str(&in[0].shape));
      return false;
    }
    unravel(i, &out->shape, idx);
    idx[ax] = v;
    memcpy((char *)out->data + (size_t)i * es, (const char *)in[0].data + (size_t)ravel(idx, &in[0].shape) * es, es);
  }
  return true;
}

/* Scatter and index_copy: out = x, then every element (scatter) or slice (index_copy)
 * of the source stored at its index along a.axis, in row-major order, so the last of
 * duplicate targets wins; an index outside [0, n) is an error naming the line. */
static bool interp_scatter(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  size_t es = (size_t)dtype_size(out->dtype);
  int ax = n->a.axis;
  int64_t count = shape_numel(&in[2].shape), idx[KILN_MAX_RANK], limit = in[0].shape.dim[ax];
  memcpy(out->data, in[0].data, (size_t)shape_numel(&out->shape) * es);
  for (int64_t i = 0; i < count; i++) {
    unravel(i, &in[2].shape, idx);
    int32_t v = ((const int32_t *)in[1].data)[n->op == OP_SCATTER ? i : idx[ax]];
    if (v < 0 || v >= limit) {
      snprintf(err, errlen, "%s:%d: %s: index %d out of range [0, %lld) for %s", n->loc.file ? n->loc.file : "?", n->loc.line,
               kiln_ops[n->op].name, (int)v, (long long)limit, shape_str(&in[0].shape));
      return false;
    }
    idx[ax] = v;
    memcpy((char *)out->data + (size_t)ravel(idx, &out->shape) * es, (const char *)in[2].data + (size_t)i * es, es);
  }
  return true;
}
#define interp_SCATTER interp_scatter
#define interp_INDEX_COPY interp_scatter

/* Does value a come strictly before b in topk's order? Largest first (or smallest
 * first), a NaN above every number; equal values (two NaNs too) are not ordered here:
 * the caller keeps them by index. */
static bool topk_before(double a, double b, bool largest) {
  if (isnan(a) || isnan(b)) return largest ? isnan(a) && !isnan(b) : isnan(b) && !isnan(a);
  return largest ? a > b : a < b;
}

/* Stable merge sort of the indices ix[0..n) of one line (values v[ix * stride]) by
 * topk_before; tmp has room for n. */
static void topk_sort(int32_t *ix, int32_t *tmp, int64_t n, const float *v, int64_t stride, bool largest) {
  if (n < 2) return;
  int64_t h = n / 2;
  topk_sort(ix, tmp, h, v, stride, largest);
  topk_sort(ix + h, tmp, n - h, v, stride, largest);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = topk_before(v[ix[j] * stride], v[ix[i] * stride], largest) ? ix[j++] : ix[i++];
  while (i < h) tmp[k++] = ix[i++];
  while (j < n) tmp[k++] = ix[j++];
  memcpy(ix, tmp, sizeof(int32_t) * (size_t)n);
}

/* Topk: per line along a.axis, the whole line sorted stably, the first a.k indices
 * kept. Cannot fail. */
static bool interp_TOPK(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  int64_t outer = 1, len = in[0].shape.dim[n->a.axis], inner = 1, k = n->a.k;
  for (int d = 0; d < n->a.axis; d++) outer *= in[0].shape.dim[d];
  for (int d = n->a.axis + 1; d < in[0].shape.rank; d++) inner *= in[0].shape.dim[d];
  int32_t *ix = kiln_alloc(sizeof(int32_t) * (size_t)len), *tmp = kiln_alloc(sizeof(int32_t) * (size_t)len);
  int32_t *o = (int32_t *)out->data;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      for (int64_t i = 0; i < len; i++) ix[i] = (int32_t)i;
      topk_sort(ix, tmp, len, (const float *)in[0].data + a * len * inner + c, inner, n->a.largest);
      for (int64_t r = 0; r < k; r++) o[(a * k + r) * inner + c] = ix[r];
    }
  return true;
}

/* out = x with y stored at rows at.. of a.axis (a.ring: row i at (at + i) mod the
 * length); an offset that would put a row of y outside x, or a negative ring offset, is
 * an error naming the node's line. */
static bool interp_WRITE(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  size_t es = (size_t)dtype_size(out->dtype);
  int ax = n->a.axis;
  int32_t at = *(const int32_t *)in[2].data;
  int64_t rows = in[1].shape.dim[ax], limit = in[0].shape.dim[ax];
  if (at < 0 || (!n->a.ring && at > limit - rows)) {
    snprintf(err, errlen, "%s:%d: write: offset %d puts %lld row%s outside [0, %lld) along axis %d of state %s %s",
             n->loc.file ? n->loc.file : "?", n->loc.line, (int)at, (long long)rows, rows == 1 ? "" : "s", (long long)limit,
             ax, n->name ? n->name : "?", shape_str(&in[0].shape));
    return false;
  }
  memcpy(out->data, in[0].data, (size_t)shape_numel(&out->shape) * es);
  int64_t count = shape_numel(&in[1].shape), idx[KILN_MAX_RANK];
  for (int64_t i = 0; i < count; i++) {
    unravel(i, &in[1].shape, idx);
    idx[ax] = n->a.ring ? (idx[ax] + at) % limit : idx[ax] + at;
    memcpy((char *)out->data + (size_t)ravel(idx, &out->shape) * es, (const char *)in[1].data + (size_t)i * es, es);
  }
  return true;
}

/* Leaves are never evaluated: interp_graph takes their data as it is. */
static bool interp_leaf(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)in, (void)out, (void)err, (void)errlen;
  die("interp: leaf %s %%%d has no computation", kiln_ops[n->op].name, n->id);
}
#define interp_INPUT interp_leaf
#define interp_WEIGHT interp_leaf
#define interp_CONST interp_leaf
#define interp_STATE interp_leaf

/* The keys row i of sdpa sees, as positions lo..hi (none when lo > hi), each at slot
 * sdpa_slot(n, S, p). Without a window: j < min(clamp(len, 0, S), pos + i + 1 if causal).
 * With window W (a ring of S slots, docs/ops.md): pos + i - W < p <= pos + i, p < len,
 * p >= 0 and p >= len - S (older positions were overwritten). */
static void sdpa_range(const Node *n, int64_t S, int64_t len, int64_t pos, int64_t i, int64_t *lo, int64_t *hi) {
  if (n->a.window > 0) {
    int64_t a = pos + i - n->a.window + 1, b = len - S;
    *lo = a > b ? a : b;
    if (*lo < 0) *lo = 0;
    *hi = pos + i < len - 1 ? pos + i : len - 1;
    return;
  }
  int64_t end = len < 0 ? 0 : len > S ? S : len;
  if (n->a.causal && pos + i + 1 < end) end = pos + i + 1 < 0 ? 0 : pos + i + 1;
  *lo = 0, *hi = end - 1;
}

/* The slot of key position p (>= 0): p mod S in a ring (window), p otherwise. */
static int64_t sdpa_slot(const Node *n, int64_t S, int64_t p) { return n->a.window > 0 ? p % S : p; }

/* Attention the plain way: every score of a row in double, its softmax, the weighted sum
 * of v; the C and Metal kernels' online softmax must agree with it. Cannot fail. */
static bool interp_SDPA(const Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  int64_t HQ = in[0].shape.dim[0], T = in[0].shape.dim[1], D = in[0].shape.dim[2];
  int64_t HKV = in[1].shape.dim[0], S = in[1].shape.dim[1], G = HQ / HKV;
  int64_t len = ((const int32_t *)in[3].data)[0], pos = ((const int32_t *)in[4].data)[0];
  const float *q = in[0].data, *k = in[1].data, *v = in[2].data;
  double *s = kiln_alloc(sizeof(double) * (size_t)S);
  for (int64_t h = 0; h < HQ; h++)
    for (int64_t i = 0; i < T; i++) {
      const float *qi = q + (h * T + i) * D, *kh = k + h / G * S * D, *vh = v + h / G * S * D;
      int64_t lo, hi;
      sdpa_range(n, S, len, pos, i, &lo, &hi);
      int64_t cnt = hi >= lo ? hi - lo + 1 : 0;   /* <= S: the window's slots are distinct */
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < cnt; j++) {
        const float *kj = kh + sdpa_slot(n, S, lo + j) * D;
        double d = 0;
        for (int64_t c = 0; c < D; c++) d += (double)qi[c] * kj[c];
        s[j] = d * n->a.scale;
        if (s[j] > mx) mx = s[j];
      }
      for (int64_t j = 0; j < cnt; j++) sum += s[j] = exp(s[j] - mx);
      for (int64_t c = 0; c < D; c++) {
        double acc = 0;
        for (int64_t j = 0; j < cnt; j++) acc += s[j] * vh[sdpa_slot(n, S, lo + j) * D + c];
        f32_out(out)[(h * T + i) * D + c] = cnt ? (float)(acc / sum) : 0.0f;
      }
    }
  return true;
}

static InterpFn *const interp_fns[OP__COUNT] = {
#define X(id, nm, mi, ma, fam, fl, ex, iex, dc) [OP_##id] = interp_##id,
    KILN_OPS(X)
#undef X
};

/* Evaluates one non-leaf node into out, whose dtype, shape and buffer the caller provides;
 * in[] are its operands' values. Dies on a mismatched or missing buffer; false + err on a data
 * error (only gather's index range today). */
bool interp_node(Graph *g, Node *n, const Tensor *in, Tensor *out, char *err, size_t errlen) {
  (void)g;
  if (out->dtype != n->dtype || !shape_eq(&out->shape, &n->shape) || !out->data)
    die("interp: output tensor of %%%d does not match the node", n->id);
  for (int i = 0; i < n->nin; i++)
    if (!in[i].data) die("interp: input %d of %%%d has no data", i, n->id);
  return interp_fns[n->op](n, in, out, err, errlen);
}

/* Contract: evaluates the live nodes the outputs depend on, in id order; inputs[i]
 * must match Graph.inputs[i]'s dtype and shape (checked, a mismatch dies); outputs[i]
 * gets a fresh copy of output i. Returns false with a message on a data error. */
bool interp_graph(Graph *g, const Tensor *inputs, Tensor *outputs, char *err, size_t errlen) {
  return interp_entry(g, inputs, NULL, outputs, err, errlen);
}

/* Contract in kiln.h. Every version of a state is its own buffer here (the graph is
 * functional): a STATE leaf reads a copy of state[i], a WRITE makes a new copy, and
 * the last version of each state is copied back only once everything succeeded. So
 * the interpreter needs no schedule, and is the oracle for the in-place targets. */
bool interp_entry(Graph *g, const Tensor *inputs, Tensor *state, Tensor *outputs, char *err, size_t errlen) {
  bool *need = kiln_alloc(sizeof(bool) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->noutputs; i++) need[g->outputs[i].node] = true;
  for (int s = 0; s < g->nstate_last; s++)   /* the writes are the entry's side effects */
    if (g->state_last[s] >= 0 && g->nodes[g->state_last[s]]->op == OP_WRITE) need[g->state_last[s]] = true;
  for (int i = g->nnodes - 1; i >= 0; i--)
    if (need[i])
      for (int k = 0; k < g->nodes[i]->nin; k++) need[g->nodes[i]->in[k]] = true;
  Tensor *val = kiln_alloc(sizeof(Tensor) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!need[i]) continue;
    if (n->dead) die("interp: output depends on dead %%%d", i);
    val[i] = (Tensor){n->dtype, n->shape, (void *)node_data(n)};   /* a weight is materialised here (kept until exit) */
    if (n->op == OP_INPUT) {
      const Tensor *t = &inputs[n->io_index];
      if (t->dtype != n->dtype || !shape_eq(&t->shape, &n->shape)) die("interp: input %s has the wrong type", g->inputs[n->io_index].name);
      val[i].data = t->data;
      continue;
    }
    if (n->op == OP_STATE) {
      if (!state || !g->prog || n->a.state < 0 || n->a.state >= g->prog->nstates) die("interp: %%%d reads a state it was not given", i);
      const Tensor *t = &state[n->a.state];
      if (t->dtype != n->dtype || !shape_eq(&t->shape, &n->shape)) die("interp: state %d has the wrong type", n->a.state);
      val[i].data = memcpy(kiln_alloc((size_t)node_bytes(n)), t->data, (size_t)node_bytes(n));
      continue;
    }
    if (n->op == OP_WEIGHT || n->op == OP_CONST) continue;
    Tensor *args = kiln_alloc(sizeof(Tensor) * (size_t)(n->nin + 1));
    for (int k = 0; k < n->nin; k++) args[k] = val[n->in[k]];
    val[i].data = kiln_alloc((size_t)node_bytes(n));
    if (!interp_node(g, n, args, &val[i], err, errlen)) return false;
  }
  for (int i = 0; i < g->noutputs; i++) {
    const Tensor *v = &val[g->outputs[i].node];
    size_t bytes = (size_t)(shape_numel(&v->shape) * dtype_size(v->dtype));
    outputs[i] = (Tensor){v->dtype, v->shape, memcpy(kiln_alloc(bytes), v->data, bytes)};
  }
  for (int s = 0; s < g->nstate_last; s++) {
    int last = g->state_last[s];
    if (last < 0 || g->nodes[last]->op == OP_STATE) continue;
    if (!state) die("interp: the graph writes state %d and was given none", s);
    memcpy(state[s].data, val[last].data, (size_t)node_bytes(g->nodes[last]));
  }
  return true;
}
