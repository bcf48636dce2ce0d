/*
 * ops.h — the op table: the single source of truth for every op Kiln knows.
 *
 * Each row is X(ID, name, min_in, max_in, family, flags, expr, iexpr, doc):
 *   ID      enum suffix (OP_ADD)            name    the Lua/JSON/dump spelling
 *   min_in  fewest inputs                    max_in  most inputs (-1: variadic)
 *   family  which kernel template renders it in every target (see OpFamily)
 *   flags   OPF_* bits                       expr    scalar expression for
 *           elementwise families, over operands x, y, z in input order, in the
 *           neutral dialect that every target maps through its own function
 *           table (exp, erf, fabs... -> expf / metal::exp ...); NULL otherwise
 *   iexpr   the same on i32 operands, or NULL when the op takes f32 only. i32
 *           arithmetic wraps (two's complement, as PyTorch's int32 does): it is
 *           written through i64(...) and i32(...), widening to 64 bits and
 *           narrowing back, so no target ever overflows a signed int (undefined
 *           behaviour in C and MSL)
 *   doc     one-line semantics
 *
 * The enum, names, shape rules (shape.c: shape_<ID>), interpreter entries
 * (interp.c: interp_<ID>) and each emitter's template choice all derive from
 * this table; adding an op is one row here plus its kernel if its family is new.
 * Comparison results are DT_BOOL (one byte per element). An op with an iexpr takes
 * operands that are all f32 or all i32 (OPF_F32 then means "not bool").
 *
 * STATE and WRITE are the only ops about persistent state (kiln.state): the graph
 * stays functional — a WRITE yields a new version of the state and later reads use
 * it — while targets store every version of one state in the same bytes of the
 * caller's state block, which is why pass_schedule orders each read of a version
 * before the write that overwrites it (docs/pipeline.md, "State").
 */
#ifndef KILN_OPS_H
#define KILN_OPS_H

#define KILN_OPS(X) \
  /* leaves */ \
  X(INPUT,      "input",      0, 0, FAM_LEAF,    0, NULL, NULL, "a model input, given by the caller at run time") \
  X(WEIGHT,     "weight",     0, 0, FAM_LEAF,    0, NULL, NULL, "a named parameter, loaded or seeded, stored in the weights blob") \
  X(CONST,      "const",      0, 0, FAM_LEAF,    0, NULL, NULL, "a literal or folded constant, stored in the weights blob") \
  X(STATE,      "state",      0, 0, FAM_LEAF,    0, NULL, NULL, "persistent state a.state as the entry found it (caller-owned state block, kiln.state)") \
  /* elementwise, numpy broadcasting */ \
  X(ADD,        "add",        2, 2, FAM_BINARY,  OPF_F32, "x + y", "i32(i64(x) + y)", "x + y") \
  X(SUB,        "sub",        2, 2, FAM_BINARY,  OPF_F32, "x - y", "i32(i64(x) - y)", "x - y") \
  X(MUL,        "mul",        2, 2, FAM_BINARY,  OPF_F32, "x * y", "i32(i64(x) * y)", "x * y") \
  X(DIV,        "div",        2, 2, FAM_BINARY,  OPF_F32, "x / y", NULL, "x / y (IEEE: /0 gives inf or nan)") \
  X(POW,        "pow",        2, 2, FAM_BINARY,  OPF_F32, "pow(x, y)", NULL, "x raised to y") \
  X(MAX,        "max",        2, 2, FAM_BINARY,  OPF_F32, "fmax(x, y)", "(x > y ? x : y)", "larger of x and y (a NaN loses to a number)") \
  X(MIN,        "min",        2, 2, FAM_BINARY,  OPF_F32, "fmin(x, y)", "(x < y ? x : y)", "smaller of x and y (a NaN loses to a number)") \
  X(FMOD,       "fmod",       2, 2, FAM_BINARY,  OPF_F32, "fmod(x, y)", "(y == 0 ? 0 : i32(i64(x) % y))", "torch.fmod: x - trunc(x / y) * y, exactly; the sign of x (i32: 0 where y is 0)") \
  X(REMAINDER,  "remainder",  2, 2, FAM_BINARY,  OPF_F32, "(fmod(x, y) != 0.0f && (fmod(x, y) < 0.0f) != (y < 0.0f) ? fmod(x, y) + y : fmod(x, y))", "(y == 0 ? 0 : i32((i64(x) % y + y) % y))", "torch.remainder, Python's %: x - floor(x / y) * y, the sign of y (i32: 0 where y is 0)") \
  X(EQ,         "eq",         2, 2, FAM_BINARY,  OPF_F32 | OPF_CMP, "x == y", "x == y", "x == y, bool result") \
  X(NE,         "ne",         2, 2, FAM_BINARY,  OPF_F32 | OPF_CMP, "x != y", "x != y", "x != y, bool result") \
  X(LT,         "lt",         2, 2, FAM_BINARY,  OPF_F32 | OPF_CMP, "x < y", "x < y",  "x < y, bool result") \
  X(LE,         "le",         2, 2, FAM_BINARY,  OPF_F32 | OPF_CMP, "x <= y", "x <= y", "x <= y, bool result") \
  X(GT,         "gt",         2, 2, FAM_BINARY,  OPF_F32 | OPF_CMP, "x > y", "x > y",  "x > y, bool result") \
  X(GE,         "ge",         2, 2, FAM_BINARY,  OPF_F32 | OPF_CMP, "x >= y", "x >= y", "x >= y, bool result") \
  X(WHERE,      "where",      3, 3, FAM_SELECT,  0, "x ? y : z", NULL, "y where bool x is true, else z") \
  X(NEG,        "neg",        1, 1, FAM_UNARY,   OPF_F32, "-x", "i32(-i64(x))", "-x") \
  X(ABS,        "abs",        1, 1, FAM_UNARY,   OPF_F32, "fabs(x)", "i32(i64(x) < 0 ? -i64(x) : i64(x))", "|x|") \
  X(EXP,        "exp",        1, 1, FAM_UNARY,   OPF_F32, "exp(x)", NULL, "e^x") \
  X(LOG,        "log",        1, 1, FAM_UNARY,   OPF_F32, "log(x)", NULL, "natural log") \
  X(SQRT,       "sqrt",       1, 1, FAM_UNARY,   OPF_F32, "sqrt(x)", NULL, "square root") \
  X(RSQRT,      "rsqrt",      1, 1, FAM_UNARY,   OPF_F32, "1.0f / sqrt(x)", NULL, "1 / sqrt(x)") \
  X(TANH,       "tanh",       1, 1, FAM_UNARY,   OPF_F32, "tanh(x)", NULL, "hyperbolic tangent") \
  X(SIGMOID,    "sigmoid",    1, 1, FAM_UNARY,   OPF_F32, "1.0f / (1.0f + exp(-x))", NULL, "logistic 1/(1+e^-x)") \
  X(RELU,       "relu",       1, 1, FAM_UNARY,   OPF_F32, "(x > 0.0f ? x : 0.0f)", NULL, "max(x, 0)") \
  X(GELU,       "gelu",       1, 1, FAM_UNARY,   OPF_F32, "0.5f * x * (1.0f + erf(x * 0.70710678118654752f))", NULL, "exact GELU, x * Phi(x) with erf") \
  X(GELU_TANH,  "gelu_tanh",  1, 1, FAM_UNARY,   OPF_F32, "0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)))", NULL, "GELU, tanh approximation") \
  X(SILU,       "silu",       1, 1, FAM_UNARY,   OPF_F32, "x / (1.0f + exp(-x))", NULL, "x * sigmoid(x)") \
  X(SIN,        "sin",        1, 1, FAM_UNARY,   OPF_F32, "sin(x)", NULL, "sine (radians)") \
  X(COS,        "cos",        1, 1, FAM_UNARY,   OPF_F32, "cos(x)", NULL, "cosine (radians)") \
  X(ERF,        "erf",        1, 1, FAM_UNARY,   OPF_F32, "erf(x)", NULL, "error function (Metal: a polynomial, |error| < 1.5e-7)") \
  X(FLOOR,      "floor",      1, 1, FAM_UNARY,   OPF_F32, "floor(x)", NULL, "largest integer <= x") \
  X(CEIL,       "ceil",       1, 1, FAM_UNARY,   OPF_F32, "ceil(x)", NULL, "smallest integer >= x") \
  X(ROUND,      "round",      1, 1, FAM_UNARY,   OPF_F32, "rint(x)", NULL, "nearest integer, halves to even (torch.round)") \
  X(ROUND_F16,  "round_f16",  1, 1, FAM_UNARY,   OPF_F32, "round_f16(x)", NULL, "the nearest float16 value, as f32 (x.half().float(): ties to even, past 65504 to inf)") \
  X(CAST,       "cast",       1, 1, FAM_CAST,    0, NULL, NULL, "convert to dtype a.to (f32->i32 truncates toward zero; to bool: x != 0)") \
  X(COPY,       "copy",       1, 1, FAM_UNARY,   0, "x", NULL, "identity copy (materialises an output that would alias)") \
  /* contractions and windows */ \
  X(MATMUL,     "matmul",     2, 2, FAM_MATMUL,  OPF_F32, NULL, NULL, "batched x @ y over the last two dims, leading dims broadcast; a.trans_x/a.trans_y transpose them first") \
  X(CONV2D,     "conv2d",     2, 3, FAM_CONV,    OPF_F32, NULL, NULL, "NCHW x (*) OIHW w [+ bias O], stride, pad (t,l,b,r), dilation, groups") \
  X(CONV_TRANSPOSE2D, "conv_transpose2d", 2, 3, FAM_CONV_TRANSPOSE, OPF_F32, NULL, NULL, "NCHW x, IOHW w [+ bias O]: the gradient of conv2d (torch.conv_transpose2d); stride, pad (t,l,b,r; b,r lowered by output_padding), dilation, groups") \
  X(MAXPOOL2D,  "maxpool2d",  1, 1, FAM_POOL,    OPF_F32, NULL, NULL, "NCHW max over kernel windows; padding never wins") \
  X(AVGPOOL2D,  "avgpool2d",  1, 1, FAM_POOL,    OPF_F32, NULL, NULL, "NCHW mean over kernel windows; a.count_pad counts padding in the divisor") \
  /* reductions and normalisations */ \
  X(REDUCE_SUM, "reduce_sum", 1, 1, FAM_REDUCE,  OPF_F32, NULL, NULL, "sum over the a.axes bitmask, a.keepdims keeps them as size 1") \
  X(REDUCE_MEAN,"reduce_mean",1, 1, FAM_REDUCE,  OPF_F32, NULL, NULL, "mean over the a.axes bitmask") \
  X(REDUCE_MAX, "reduce_max", 1, 1, FAM_REDUCE,  OPF_F32, NULL, NULL, "max over the a.axes bitmask") \
  X(REDUCE_MIN, "reduce_min", 1, 1, FAM_REDUCE,  OPF_F32, NULL, NULL, "min over the a.axes bitmask (torch.amin; NaN propagates)") \
  X(REDUCE_PROD,"reduce_prod",1, 1, FAM_REDUCE,  OPF_F32, NULL, NULL, "product over the a.axes bitmask (torch.prod)") \
  X(ARGMAX,     "argmax",     1, 1, FAM_ARGREDUCE, OPF_F32, NULL, NULL, "i32 index of the largest x along a.axis (a.keepdims); first on a tie, a NaN wins (torch)") \
  X(ARGMIN,     "argmin",     1, 1, FAM_ARGREDUCE, OPF_F32, NULL, NULL, "i32 index of the smallest x along a.axis (a.keepdims); first on a tie, a NaN wins (torch)") \
  X(SOFTMAX,    "softmax",    1, 1, FAM_SOFTMAX, OPF_F32, NULL, NULL, "exp(x - max) / sum over a.axis") \
  X(LAYERNORM,  "layernorm",  1, 3, FAM_NORM,    OPF_F32, NULL, NULL, "(x - mean) / sqrt(var + eps) over dims a.axis.. end, then * gamma + beta") \
  X(RMSNORM,    "rmsnorm",    1, 2, FAM_NORM,    OPF_F32, NULL, NULL, "x / sqrt(mean(x^2) + eps) over dims a.axis.. end, then * gamma") \
  X(BATCHNORM,  "batchnorm",  5, 5, FAM_BATCHNORM, OPF_F32, NULL, NULL, "inference batchnorm on dim 1: (x - mean) / sqrt(var + eps) * gamma + beta") \
  /* data movement */ \
  X(RESHAPE,    "reshape",    1, 1, FAM_VIEW,    0, NULL, NULL, "same elements, new shape (no copy: a view of x)") \
  X(TRANSPOSE,  "transpose",  1, 1, FAM_TRANSPOSE, 0, NULL, NULL, "out dim i = x dim a.perm[i]") \
  X(CONCAT,     "concat",     1, -1, FAM_CONCAT, 0, NULL, NULL, "join inputs along a.axis") \
  X(SLICE,      "slice",      1, 1, FAM_SLICE,   0, NULL, NULL, "x[start:end:step] per dim (step > 0)") \
  X(GATHER,     "gather",     2, 2, FAM_GATHER,  0, NULL, NULL, "take i32 indices y along a.axis of x (embedding: axis 0); out of [0, n): interpreter error, kernels clamp") \
  X(GATHER_ELEMENTS, "gather_elements", 2, 2, FAM_GATHER_ELEMENTS, 0, NULL, NULL, "torch.gather: out[..i..] = x[..y[..i..]..] along a.axis, y i32 of x's rank; out of [0, n): interpreter error, kernels clamp") \
  X(SCATTER,    "scatter",    3, 3, FAM_SCATTER, 0, NULL, NULL, "torch.scatter: x with out[..y[..i..]..] = z[..i..] along a.axis; the last of duplicate targets wins; out of [0, n): interpreter error, kernels skip") \
  X(INDEX_COPY, "index_copy", 3, 3, FAM_SCATTER, 0, NULL, NULL, "torch.index_copy: x with slice y[j] along a.axis = slice j of z (1-D i32 y); the last duplicate wins; out of [0, n): interpreter error, kernels skip") \
  X(TOPK,       "topk",       1, 1, FAM_TOPK,    OPF_F32, NULL, NULL, "i32 indices of the a.k largest (a.largest) or smallest x along a.axis, in order; equal values by index, NaN above every number") \
  /* attention */ \
  X(SDPA,       "sdpa",       5, 5, FAM_ATTENTION, 0, NULL, NULL, "softmax(q k^T * a.scale) v: q [Hq,T,D], k/v [Hkv,S,D] (query head h reads kv head h/(Hq/Hkv)), i32 scalars len (keys j < len, clamped to [0,S]) and pos (a.causal: row i sees j <= pos+i); a.window W > 0: k/v a ring, row i sees positions pos+i-W < p <= pos+i, len-S <= p < len, from slot p mod S; a row seeing no key is 0") \
  /* side effects */ \
  X(WRITE,      "write",      3, 3, FAM_WRITE,   0, NULL, NULL, "state version x with y stored at i32 scalar offset z along a.axis (a.ring: row i at (z + i) mod the length) in place in state a.state; out of range: error, nothing written")

#endif
