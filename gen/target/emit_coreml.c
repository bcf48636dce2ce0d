/*
 * emit_coreml.c — the Core ML target: the planned graph as an ML Program package.
 *
 *   NAME.mlpackage/Manifest.json
 *   NAME.mlpackage/Data/com.apple.CoreML/model.mlmodel      (Model protobuf, spec 6..9)
 *   NAME.mlpackage/Data/com.apple.CoreML/weights/weight.bin (MILBlob v2, if any blob)
 *
 * Shape of the code: one lowering function per op family turns a Kiln node into
 * one MIL op (or a short composition) through the builder in mil.c, walking the
 * live nodes in graph order, so MIL's "defined before use" holds by construction.
 * Constants (WEIGHT/CONST leaves) become const ops lazily, right before their
 * first use, so a weight only a fused op needs (matmul + bias add -> `linear`)
 * is written once, and an unused one never. Every optional MIL input that has a
 * default is written explicitly as its own const op (coremltools does the same).
 *
 * Precision: with --precision fp16 every f32 value, weight and op is typed fp16
 * in the program (what the Neural Engine runs); model inputs and outputs stay
 * fp32 multi-arrays at every spec version, with a `cast` after each input and
 * before each output, so callers pass the same buffers as for the C target.
 * Kiln's bool inputs/outputs travel as INT32 multi-arrays (Core ML has no bool
 * multi-array), cast to and from bool inside the program.
 *
 * Determinism: names come from node names (sanitised, deduplicated in graph
 * order), the manifest identifiers are derived from the model name (see
 * manifest_id), and nothing depends on pointers, time or hash order.
 */
#include "coreml_package.h"
#include "coreml_rank.h"
#include "coreml_weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  Graph *g;
  Mil *m;
  MilType ft;             /* MIL type of Kiln's f32 values: MIL_F16 or MIL_F32 */
  int spec;               /* Model.specificationVersion, 6..9 */
  const char *const *state_in;  /* per state of the program: its MIL function input (state.c) */
  const char **v16;       /* per STATE/WRITE node id: the state version as the fp16 tensor Core ML keeps */
  const char *ok;         /* bool scalar: every run-time write offset is in range; NULL: none */
  const char **at;        /* per WRITE node id with a run-time offset: the offset clamped into range */
  const char **val;       /* per node id: its MIL value name, once emitted */
  const char **exact;     /* per node id: the graph output name its op must carry, or NULL */
  int *uses, *user;       /* per node id: live consumers (+ graph outputs), and the last consumer */
  bool *done;             /* per node id: already lowered together with an earlier node */
  const char **raw;       /* per stored-format WEIGHT id: its value as coreml_weight made it */
  MilType *rawt;          /* ... and that value's type (may differ from ft; value() casts) */
  CwNotes *notes;         /* weights held uncompressed, for the build's note */
} Lower;

static const struct {
  const char *os, *opset;
  int spec;
} os_table[] = {
    {"iOS15", "CoreML5", 6}, {"iOS16", "CoreML6", 7}, {"iOS17", "CoreML7", 8}, {"iOS18", "CoreML8", 9},
};

/* ---- helpers ---- */

/* Operand i of n as a node (for its dtype, shape or constness, not its MIL value). */
static Node *in_node(const Lower *L, const Node *n, int i) { return graph_node(L->g, n->in[i]); }

/* The MIL element type a Kiln dtype lowers to: f32 becomes the program's float type (fp16
 * under --fp16), i32 stays int32, bool stays bool, and i64 (an input only) is int32: MIL
 * and MLMultiArray have no int64, so the package declares it int32 and the runtime
 * wrapper narrows the caller's int64 values (range-checked) as coremltools does. */
static MilType mil_type(const Lower *L, DType t) {
  return t == DT_F32 ? L->ft : t == DT_I32 || t == DT_I64 ? MIL_I32 : MIL_BOOL;
}

/* A WEIGHT/CONST with data, which lowers to a MIL const op (emitted lazily, on first use). */
static bool is_const_leaf(const Node *n) { return (n->op == OP_WEIGHT || n->op == OP_CONST) && (n->data || n->src); }

/* "layers.0.fc" + "linear" -> "layers.0.fc_linear" (sanitised by mil_fresh later). */
static const char *base_name(const Node *n, const char *what) {
  return n->name ? kiln_fmt("%s_%s", n->name, what) : what;
}

/* The base name of a parameter const of n's op: "<node>_<what>_<param>", e.g. "fc_conv_strides". */
static const char *param_name(const Node *n, const char *what, const char *param) {
  return kiln_fmt("%s_%s", base_name(n, what), param);
}

/* Emits a leaf's const op (its data converted to the program's types). */
static const char *emit_leaf(Lower *L, const Node *n) {
  const char *base = n->name ? n->name : "const";
  switch (n->dtype) {
  case DT_F32: return mil_const_float(L->m, base, L->ft, &n->shape, node_data(n));
  case DT_I32: return mil_const_int(L->m, base, &n->shape, node_data(n));
  case DT_BOOL: return mil_const_bool(L->m, base, &n->shape, node_data(n));
  case DT_I64: break;   /* inputs only, never a leaf with data */
  }
  die("bad dtype");
}

static const char *state_value(Lower *L, const Node *n);
static const char *cast_step(Lower *L, const Node *n, const char *v, const char *label, MilType to, const Shape *s);

/* A WEIGHT the build keeps in a stored format (f16, q4_0, ...: docs/quantization.md). */
static bool is_stored(const Node *n) { return n->op == OP_WEIGHT && n->wfmt != WF_F32 && (n->data || n->src); }

/* A stored-format weight as coreml_weight holds it (fp16 const, constexpr op, or plain),
 * made on first use; *t: its MIL type, which is not always the program's (see there). */
static const char *stored_raw(Lower *L, const Node *w, MilType *t) {
  if (!L->raw[w->id]) L->raw[w->id] = coreml_weight(L->m, w, L->ft, L->spec, &L->rawt[w->id], L->notes);
  *t = L->rawt[w->id];
  return L->raw[w->id];
}

/* The MIL value name of node id; a WEIGHT/CONST leaf gets its const op on first use (a
 * stored-format weight of another type than the program's is cast to it), a state
 * version its conversion from fp16 (coreml_state_value). */
static const char *value(Lower *L, int id) {
  if (L->val[id]) return L->val[id];
  Node *n = graph_node(L->g, id);
  if (n->op == OP_STATE || n->op == OP_WRITE) return L->val[id] = state_value(L, n);
  if (!is_const_leaf(n)) die("node %d (%s) used before it was lowered", id, kiln_ops[n->op].name);
  if (is_stored(n)) {
    MilType t;
    const char *v = stored_raw(L, n, &t);
    return L->val[id] = t == L->ft ? v : cast_step(L, n, v, "cast", L->ft, &n->shape);
  }
  return L->val[id] = emit_leaf(L, n);
}

/* The MIL value name of operand i of n (emitting its const op if it is a leaf not yet used). */
static const char *X(Lower *L, const Node *n, int i) { return value(L, n->in[i]); }

/* Starts the MIL op that computes node n: named after the node, or exactly after
 * the graph output it is. Every const the op needs must be emitted before this. */
static MilOp *start(Lower *L, const Node *n, const char *type) {
  if (L->exact[n->id]) return mil_op(L->m, type, L->exact[n->id], true);
  return mil_op(L->m, type, base_name(n, type), false);
}

/* Declares op's output with node n's type and records it as n's value. */
static void finish(Lower *L, const Node *n, MilOp *op) {
  L->val[n->id] = mil_result(L->m, op, mil_type(L, n->dtype), &n->shape);
}

/* A helper op inside a composition (not the one carrying n's value): named from n;
 * the caller declares its output with mil_result. */
static MilOp *step(Lower *L, const Node *n, const char *type) { return mil_op(L->m, type, base_name(n, type), false); }

/* v as an int32 MIL parameter; a value beyond int32 is a user error at n's Lua line. */
static int32_t i32(const Node *n, int64_t v) {
  if (v < INT32_MIN || v > INT32_MAX) kiln_error_at(n->loc, "%s: value %lld does not fit Core ML's int32", kiln_ops[n->op].name, (long long)v);
  return (int32_t)v;
}

/* ---- elementwise ---- */

/* The MIL op for a binary Kiln op (div is real_div, max/min are maximum/minimum); NULL
 * for a non-binary op, which lower_node never passes. */
static const char *binary_type(OpKind op) {
  switch (op) {
  case OP_ADD: return "add";
  case OP_SUB: return "sub";
  case OP_MUL: return "mul";
  case OP_DIV: return "real_div";
  case OP_POW: return "pow";
  case OP_MAX: return "maximum";
  case OP_MIN: return "minimum";
  case OP_EQ: return "equal";
  case OP_NE: return "not_equal";
  case OP_LT: return "less";
  case OP_LE: return "less_equal";
  case OP_GT: return "greater";
  case OP_GE: return "greater_equal";
  default: return NULL;
  }
}

static void lower_remainder(Lower *L, const Node *n);

/* x op y -> one MIL elementwise op; MIL broadcasts like Kiln, so shapes pass through. */
static void lower_binary(Lower *L, const Node *n) {
  if (n->op == OP_REMAINDER) {
    lower_remainder(L, n);
    return;
  }
  const char *type = binary_type(n->op);
  if (!type) kiln_error_at(n->loc, "%s: no Core ML lowering for this op", kiln_ops[n->op].name);
  const char *x = X(L, n, 0), *y = X(L, n, 1);
  MilOp *op = start(L, n, type);
  mil_arg(L->m, op, "x", x);
  mil_arg(L->m, op, "y", y);
  finish(L, n, op);
}

/* where(cond, a, b) -> MIL select(cond, a, b), broadcasting as Kiln does. */
static void lower_select(Lower *L, const Node *n) {
  const char *c = X(L, n, 0), *a = X(L, n, 1), *b = X(L, n, 2);
  MilOp *op = start(L, n, "select");
  mil_arg(L->m, op, "cond", c);
  mil_arg(L->m, op, "a", a);
  mil_arg(L->m, op, "b", b);
  finish(L, n, op);
}

/* Unary ops: MIL has most of them; neg is x * -1; log/rsqrt carry MIL's epsilon
 * (added to x) at coremltools' defaults; gelu carries its mode. */
static void lower_abs_i32(Lower *L, const Node *n);

static void lower_unary(Lower *L, const Node *n) {
  if (n->op == OP_ABS && n->dtype == DT_I32) {
    lower_abs_i32(L, n);
    return;
  }
  static const struct { OpKind op; const char *type; } direct[] = {
      {OP_ABS, "abs"}, {OP_EXP, "exp"}, {OP_SQRT, "sqrt"}, {OP_TANH, "tanh"}, {OP_SIGMOID, "sigmoid"},
      {OP_RELU, "relu"}, {OP_SILU, "silu"}, {OP_COPY, "identity"}, {OP_SIN, "sin"}, {OP_COS, "cos"},
      {OP_ERF, "erf"}, {OP_FLOOR, "floor"}, {OP_CEIL, "ceil"}, {OP_ROUND, "round"},
  };
  const char *x = X(L, n, 0);
  for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++)
    if (direct[i].op == n->op) {
      MilOp *op = start(L, n, direct[i].type);
      mil_arg(L->m, op, "x", x);
      finish(L, n, op);
      return;
    }
  const char *type, *param, *c;
  switch (n->op) {
  case OP_NEG:   /* x * -1, the -1 of x's type: MIL's mul wants both operands alike */
    type = "mul", param = "y";
    c = n->dtype == DT_I32 ? mil_scalar_int(L->m, param_name(n, "neg", "y"), -1)
                           : mil_scalar_float(L->m, param_name(n, "neg", "y"), L->ft, -1.0f);
    break;
  case OP_LOG: type = "log", param = "epsilon", c = mil_scalar_float(L->m, param_name(n, "log", "epsilon"), L->ft, 1e-45f); break;
  case OP_RSQRT: type = "rsqrt", param = "epsilon", c = mil_scalar_float(L->m, param_name(n, "rsqrt", "epsilon"), L->ft, 1e-12f); break;
  case OP_GELU: type = "gelu", param = "mode", c = mil_const_str(L->m, param_name(n, "gelu", "mode"), "EXACT"); break;
  case OP_GELU_TANH: type = "gelu", param = "mode", c = mil_const_str(L->m, param_name(n, "gelu", "mode"), "TANH_APPROXIMATION"); break;
  default: kiln_error_at(n->loc, "%s: no Core ML lowering for this op", kiln_ops[n->op].name);
  }
  MilOp *op = start(L, n, type);
  mil_arg(L->m, op, "x", x);
  mil_arg(L->m, op, param, c);
  finish(L, n, op);
}

/* MIL's cast dtype string for t; dies for MIL_STR, which is never a cast target. */
static const char *cast_name(MilType t) {
  switch (t) {
  case MIL_F16: return "fp16";
  case MIL_F32: return "fp32";
  case MIL_I32: return "int32";
  case MIL_BOOL: return "bool";
  case MIL_STR: case MIL_I8: case MIL_U8: case MIL_I4: case MIL_U4: break;
  }
  die("no cast to %d", (int)t);
}

/* v (shape s) cast to MIL type to as a step of n, its dtype const named after label. */
static const char *cast_step(Lower *L, const Node *n, const char *v, const char *label, MilType to, const Shape *s) {
  const char *dt = mil_const_str(L->m, param_name(n, label, "dtype"), cast_name(to));
  MilOp *c = step(L, n, "cast");
  mil_arg(L->m, c, "x", v);
  mil_arg(L->m, c, "dtype", dt);
  return mil_result(L->m, c, to, s);
}

/* n's result: op's int32 result cast back to bool (ops MIL refuses bool data for, run
 * through int32), the dtype const named after param. */
static void finish_as_bool(Lower *L, const Node *n, MilOp *op, const char *param) {
  const char *g = mil_result(L->m, op, MIL_I32, &n->shape);
  const char *dt = mil_const_str(L->m, param_name(n, "cast", param), "bool");
  MilOp *c = start(L, n, "cast");
  mil_arg(L->m, c, "x", g);
  mil_arg(L->m, c, "dtype", dt);
  finish(L, n, c);
}

/* The op of n's data-moving MIL type `type` that refuses bool data: for bool data (b) a
 * step whose int32 result close_via_i32 casts back, else n's own op. */
static MilOp *open_via_i32(Lower *L, const Node *n, const char *type, bool b) {
  return b ? step(L, n, type) : start(L, n, type);
}

/* Ends what open_via_i32 began: n's result is op's, cast back to bool when b (the dtype
 * const named after param). */
static void close_via_i32(Lower *L, const Node *n, MilOp *op, bool b, const char *param) {
  if (b) finish_as_bool(L, n, op, param);
  else finish(L, n, op);
}

/* cast -> MIL cast to the target's MIL type (a "dtype" string const), or identity when both
 * sides lower to the same MIL type (the tracer already drops same-dtype casts). */
static void lower_cast(Lower *L, const Node *n) {
  const Node *x = in_node(L, n, 0);
  MilType from = mil_type(L, x->dtype), to = mil_type(L, n->dtype);
  const char *xv = X(L, n, 0);
  if (from == to) {
    MilOp *op = start(L, n, "identity");
    mil_arg(L->m, op, "x", xv);
    finish(L, n, op);
    return;
  }
  const char *dt = mil_const_str(L->m, param_name(n, "cast", "dtype"), cast_name(to));
  MilOp *op = start(L, n, "cast");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "dtype", dt);
  finish(L, n, op);
}

/* ---- matmul / linear ---- */

/* The ADD that adds a const [D_out] bias to matmul n, if it can fold into `linear`. */
static Node *bias_add(Lower *L, const Node *n, int64_t dout, Node **bias) {
  if (L->uses[n->id] != 1 || L->user[n->id] < 0) return NULL;
  Node *c = graph_node(L->g, L->user[n->id]);
  if (c->dead || c->op != OP_ADD || c->in[0] == c->in[1] || !shape_eq(&c->shape, &n->shape)) return NULL;
  Node *b = graph_node(L->g, c->in[0] == n->id ? c->in[1] : c->in[0]);
  if (!is_const_leaf(b) || b->dtype != DT_F32 || b->shape.rank != 1 || b->shape.dim[0] != dout) return NULL;
  *bias = b;
  return c;
}

/* x @ W (+ b) with a constant rank-2 W becomes MIL `linear` (weight [D_out, D_in],
 * the transpose of x @ W's operand unless trans_y); anything else `matmul`. A stored-
 * format W whose value is not of the program's type (coreml_weight) is a `linear` weight
 * only where MIL allows it: an fp32 weight of an fp16 program from iOS17 (type domain U,
 * the bias then fp32 too); an fp16 const below iOS18 in an fp32 program goes through a
 * cast and `matmul`, as linear's weight must be a const, not a cast. */
static void lower_matmul(Lower *L, Node *n) {
  Node *x = in_node(L, n, 0), *y = in_node(L, n, 1);
  MilType wt = L->ft;
  const char *wraw = is_stored(y) && n->a.trans_y ? stored_raw(L, y, &wt) : NULL;
  bool linear_ok = wt == L->ft || (L->spec >= 8 && wt == MIL_F32);
  if (is_const_leaf(y) && linear_ok && y->shape.rank == 2 && !n->a.trans_x && x->shape.rank >= 1 && x->shape.rank <= 3) {
    int64_t k = y->shape.dim[n->a.trans_y ? 1 : 0], dout = y->shape.dim[n->a.trans_y ? 0 : 1];
    Node *bias = NULL, *add = bias_add(L, n, dout, &bias);
    const Node *named = add ? add : n;
    const char *xv = X(L, n, 0), *w, *b;
    if (n->a.trans_y) {
      w = wraw ? wraw : value(L, y->id);
    } else {
      const float *src = node_data(y);
      float *t = kiln_alloc(sizeof(float) * (size_t)(k * dout));
      for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < dout; j++) t[j * k + i] = src[i * dout + j];
      Shape ts = {.rank = 2, .dim = {dout, k}};
      w = mil_const_float(L->m, kiln_fmt("%s_t", y->name ? y->name : "weight"), L->ft, &ts, t);
    }
    if (bias) {
      b = wt == L->ft ? value(L, bias->id) : mil_const_float(L->m, kiln_fmt("%s_fp32", bias->name ? bias->name : "bias"), wt, &bias->shape, node_data(bias));
    } else {
      Shape bs = {.rank = 1, .dim = {dout}};
      b = mil_const_float(L->m, param_name(named, "linear", "bias"), wt, &bs, kiln_alloc(sizeof(float) * (size_t)dout));
    }
    MilOp *op = start(L, named, "linear");
    mil_arg(L->m, op, "x", xv);
    mil_arg(L->m, op, "weight", w);
    mil_arg(L->m, op, "bias", b);
    finish(L, named, op);
    if (add) {
      L->val[n->id] = L->val[add->id];
      L->done[add->id] = true;
    }
    return;
  }
  const char *xv = X(L, n, 0), *yv = X(L, n, 1);
  const char *tx = mil_scalar_bool(L->m, param_name(n, "matmul", "transpose_x"), n->a.trans_x);
  const char *ty = mil_scalar_bool(L->m, param_name(n, "matmul", "transpose_y"), n->a.trans_y);
  MilOp *op = start(L, n, "matmul");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "y", yv);
  mil_arg(L->m, op, "transpose_x", tx);
  mil_arg(L->m, op, "transpose_y", ty);
  finish(L, n, op);
}

/* ---- conv and pools ---- */

/* Kiln pads (top, left, bottom, right); MIL wants (before, after) per spatial dim. */
static const char *pad_const(Lower *L, const Node *n, const char *what) {
  int32_t pad[4] = {n->a.pad[0], n->a.pad[2], n->a.pad[1], n->a.pad[3]};
  return mil_ints(L->m, param_name(n, what, "pad"), pad, 4);
}

/* A [C] vector node as [1, C, 1, ...] of the given rank, for broadcasting on dim 1. */
static const char *per_channel(Lower *L, const Node *owner, const Node *p, int rank) {
  Shape s = {.rank = rank};
  for (int i = 0; i < rank; i++) s.dim[i] = 1;
  s.dim[1] = p->shape.dim[0];
  if (is_const_leaf(p) && p->dtype == DT_F32)
    return mil_const_float(L->m, kiln_fmt("%s_c", p->name ? p->name : "channel"), L->ft, &s, node_data(p));
  int32_t shp[KILN_MAX_RANK];
  for (int i = 0; i < rank; i++) shp[i] = (int32_t)s.dim[i];
  const char *pv = value(L, p->id);
  const char *sv = mil_ints(L->m, param_name(owner, "reshape", "shape"), shp, rank);
  MilOp *op = step(L, owner, "reshape");
  mil_arg(L->m, op, "x", pv);
  mil_arg(L->m, op, "shape", sv);
  return mil_result(L->m, op, mil_type(L, p->dtype), &s);
}

/* The MIL value of n's weight operand as a constant: the operand itself when it is a
 * constant leaf, or, when it is reshapes of an f32 constant leaf (conv1d's and
 * conv_transpose1d's [O, C, K] weight made 4-D, or a user's own reshape), that leaf's
 * values emitted again as a constant of the operand's shape; NULL when the weight is
 * computed. Core ML wants constant weights where the data says so (see the callers). */
static const char *const_weight(Lower *L, const Node *n) {
  const Node *w = in_node(L, n, 1), *root = w;
  while (root->op == OP_RESHAPE) root = in_node(L, root, 0);
  if (!is_const_leaf(root) || root->dtype != DT_F32) return NULL;
  if (root == w) return X(L, n, 1);
  return mil_const_float(L->m, kiln_fmt("%s_%dd", root->name ? root->name : "weight", w->shape.rank), L->ft, &w->shape,
                         node_data(root));
}

/* conv2d -> MIL conv (custom pads, strides, dilations, groups). A constant bias is passed
 * directly; a computed one is added after the conv. A dilated conv needs a constant weight
 * (Core ML rejects a computed one): a parameter, or reshapes of one (const_weight); a
 * computed weight there is a user error naming the line. */
static void lower_conv(Lower *L, const Node *n) {
  const Node *b = n->nin > 2 ? in_node(L, n, 2) : NULL;
  bool dilated = n->a.dilation[0] != 1 || n->a.dilation[1] != 1;
  const char *xv = X(L, n, 0), *wv = dilated ? const_weight(L, n) : X(L, n, 1);   /* MIL values in operand order */
  if (!wv)
    kiln_error_at(n->loc, "conv2d: the Core ML target needs a constant weight for a dilated convolution (a parameter "
                          "or a reshape of one), not a computed one");
  bool bias_direct = b && is_const_leaf(b);
  const char *bv = bias_direct ? X(L, n, 2) : NULL;
  int32_t strides[2] = {n->a.stride[0], n->a.stride[1]}, dil[2] = {n->a.dilation[0], n->a.dilation[1]};
  const char *st = mil_ints(L->m, param_name(n, "conv", "strides"), strides, 2);
  const char *pt = mil_const_str(L->m, param_name(n, "conv", "pad_type"), "custom");
  const char *pd = pad_const(L, n, "conv");
  const char *dl = mil_ints(L->m, param_name(n, "conv", "dilations"), dil, 2);
  const char *gr = mil_scalar_int(L->m, param_name(n, "conv", "groups"), n->a.groups > 0 ? n->a.groups : 1);
  MilOp *op = b && !bias_direct ? step(L, n, "conv") : start(L, n, "conv");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "weight", wv);
  if (bv) mil_arg(L->m, op, "bias", bv);
  mil_arg(L->m, op, "strides", st);
  mil_arg(L->m, op, "pad_type", pt);
  mil_arg(L->m, op, "pad", pd);
  mil_arg(L->m, op, "dilations", dl);
  mil_arg(L->m, op, "groups", gr);
  if (!b || bias_direct) {
    finish(L, n, op);
    return;
  }
  const char *c = mil_result(L->m, op, mil_type(L, n->dtype), &n->shape);   /* conv, then + bias */
  const char *bc = per_channel(L, n, b, n->shape.rank);
  MilOp *add = start(L, n, "add");
  mil_arg(L->m, add, "x", c);
  mil_arg(L->m, add, "y", bc);
  finish(L, n, add);
}

/* conv_transpose2d -> MIL conv_transpose (iOS15; weight [C, O/groups, KH, KW] as
 * PyTorch's, which MIL needs constant: a parameter, or conv_transpose1d's reshaped one,
 * emitted again in the 4-D shape). MIL's pad only removes output rows, so a negative
 * bottom/right pad (PyTorch's output_padding) is a conv_transpose without it and then
 * a constant-0 MIL pad of those rows: no input reaches them, so they hold only the
 * bias, which is then added after. */
static void lower_conv_transpose(Lower *L, const Node *n) {
  const Node *b = n->nin > 2 ? in_node(L, n, 2) : NULL;
  int eb = n->a.pad[2] < 0 ? -n->a.pad[2] : 0, er = n->a.pad[3] < 0 ? -n->a.pad[3] : 0;
  bool bias_direct = b && is_const_leaf(b) && !eb && !er, extra = eb || er;
  const char *xv = X(L, n, 0), *bv = bias_direct ? X(L, n, 2) : NULL, *wv = const_weight(L, n);
  if (!wv)
    kiln_error_at(n->loc, "conv_transpose2d: the Core ML target needs a constant weight (a parameter or a reshape of "
                          "one), not a computed one");
  int32_t strides[2] = {n->a.stride[0], n->a.stride[1]}, dil[2] = {n->a.dilation[0], n->a.dilation[1]};
  int32_t pad[4] = {n->a.pad[0], n->a.pad[2] + eb, n->a.pad[1], n->a.pad[3] + er};
  const char *st = mil_ints(L->m, param_name(n, "conv_transpose", "strides"), strides, 2);
  const char *pt = mil_const_str(L->m, param_name(n, "conv_transpose", "pad_type"), "custom");
  const char *pd = mil_ints(L->m, param_name(n, "conv_transpose", "pad"), pad, 4);
  const char *dl = mil_ints(L->m, param_name(n, "conv_transpose", "dilations"), dil, 2);
  const char *gr = mil_scalar_int(L->m, param_name(n, "conv_transpose", "groups"), n->a.groups);
  bool last = !extra && (!b || bias_direct);
  MilOp *op = last ? start(L, n, "conv_transpose") : step(L, n, "conv_transpose");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "weight", wv);
  if (bv) mil_arg(L->m, op, "bias", bv);
  mil_arg(L->m, op, "strides", st);
  mil_arg(L->m, op, "pad_type", pt);
  mil_arg(L->m, op, "pad", pd);
  mil_arg(L->m, op, "dilations", dl);
  mil_arg(L->m, op, "groups", gr);
  if (last) {
    finish(L, n, op);
    return;
  }
  Shape cs = n->shape;
  cs.dim[2] -= eb, cs.dim[3] -= er;
  const char *c = mil_result(L->m, op, mil_type(L, n->dtype), &cs);
  if (extra) {
    int32_t pp[4] = {0, eb, 0, er};
    const char *pv = mil_ints(L->m, param_name(n, "pad", "pad"), pp, 4);
    const char *mode = mil_const_str(L->m, param_name(n, "pad", "mode"), "constant");
    const char *cv = mil_scalar_float(L->m, param_name(n, "pad", "constant_val"), L->ft, 0.0f);
    MilOp *po = b ? step(L, n, "pad") : start(L, n, "pad");
    mil_arg(L->m, po, "x", c);
    mil_arg(L->m, po, "pad", pv);
    mil_arg(L->m, po, "mode", mode);
    mil_arg(L->m, po, "constant_val", cv);
    if (!b) {
      finish(L, n, po);
      return;
    }
    c = mil_result(L->m, po, mil_type(L, n->dtype), &n->shape);
  }
  const char *bc = per_channel(L, n, b, n->shape.rank);
  MilOp *add = start(L, n, "add");
  mil_arg(L->m, add, "x", c);
  mil_arg(L->m, add, "y", bc);
  finish(L, n, add);
}

/* maxpool2d/avgpool2d -> max_pool/avg_pool with custom pads and ceil_mode false; avg's
 * exclude_padding_from_average is the negation of Kiln's count_pad. */
static void lower_pool(Lower *L, const Node *n) {
  bool avg = n->op == OP_AVGPOOL2D;
  const char *type = avg ? "avg_pool" : "max_pool";
  const char *xv = X(L, n, 0);
  int32_t k[2] = {n->a.kernel[0], n->a.kernel[1]}, s[2] = {n->a.stride[0], n->a.stride[1]};
  const char *ks = mil_ints(L->m, param_name(n, type, "kernel_sizes"), k, 2);
  const char *st = mil_ints(L->m, param_name(n, type, "strides"), s, 2);
  const char *pt = mil_const_str(L->m, param_name(n, type, "pad_type"), "custom");
  const char *pd = pad_const(L, n, type);
  const char *ex = avg ? mil_scalar_bool(L->m, param_name(n, type, "exclude_padding_from_average"), !n->a.count_pad) : NULL;
  const char *cm = mil_scalar_bool(L->m, param_name(n, type, "ceil_mode"), false);
  MilOp *op = start(L, n, type);
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "kernel_sizes", ks);
  mil_arg(L->m, op, "strides", st);
  mil_arg(L->m, op, "pad_type", pt);
  mil_arg(L->m, op, "pad", pd);
  if (ex) mil_arg(L->m, op, "exclude_padding_from_average", ex);
  mil_arg(L->m, op, "ceil_mode", cm);
  finish(L, n, op);
}

/* ---- reductions and normalisations ---- */

/* The MIL reduction of a reduce op (reduce_min and reduce_prod are also iOS15 ops). */
static const char *mil_reduce_type(OpKind op) {
  switch (op) {
  case OP_REDUCE_SUM: return "reduce_sum";
  case OP_REDUCE_MEAN: return "reduce_mean";
  case OP_REDUCE_MAX: return "reduce_max";
  case OP_REDUCE_MIN: return "reduce_min";
  case OP_REDUCE_PROD: return "reduce_prod";
  default: die("reduce op %s", kiln_ops[op].name);
  }
}

/* reduce_sum/mean/max/min/prod -> MIL reduce_* over the axes set in a.axes, honouring keepdims. */
static void lower_reduce(Lower *L, const Node *n) {
  const char *type = mil_reduce_type(n->op);
  const Node *x = in_node(L, n, 0);
  int32_t axes[KILN_MAX_RANK];
  int na = 0;
  for (int i = 0; i < x->shape.rank; i++)
    if (n->a.axes & (1u << i)) axes[na++] = i;
  const char *xv = X(L, n, 0);
  const char *av = mil_ints(L->m, param_name(n, type, "axes"), axes, na);
  const char *kd = mil_scalar_bool(L->m, param_name(n, type, "keep_dims"), n->a.keepdims);
  MilOp *op = start(L, n, type);
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "axes", av);
  mil_arg(L->m, op, "keep_dims", kd);
  finish(L, n, op);
}

/* argmax/argmin along a.axis -> MIL reduce_argmax/reduce_argmin (int32 result, as
 * Kiln's). MIL does not document which index wins a tie or what a NaN does: Kiln's
 * rule (first index; a NaN wins) is what the test evaluator implements, unverified
 * on a device (docs/ops.md). */
static void lower_argreduce(Lower *L, const Node *n) {
  const char *type = n->op == OP_ARGMAX ? "reduce_argmax" : "reduce_argmin";
  const char *xv = X(L, n, 0);
  const char *ax = mil_scalar_int(L->m, param_name(n, type, "axis"), n->a.axis);
  const char *kd = mil_scalar_bool(L->m, param_name(n, type, "keep_dims"), n->a.keepdims);
  MilOp *op = start(L, n, type);
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "axis", ax);
  mil_arg(L->m, op, "keep_dims", kd);
  finish(L, n, op);
}

/* softmax along a.axis -> MIL softmax (axis already non-negative). */
static void lower_softmax(Lower *L, const Node *n) {
  const char *xv = X(L, n, 0);
  const char *ax = mil_scalar_int(L->m, param_name(n, "softmax", "axis"), n->a.axis);
  MilOp *op = start(L, n, "softmax");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "axis", ax);
  finish(L, n, op);
}

/* The axes a.axis .. rank-1 that norms normalise over; returns their count. */
static int norm_axes(const Node *n, int32_t *axes) {
  int k = 0;
  for (int i = n->a.axis; i < n->shape.rank; i++) axes[k++] = i;
  return k;
}

/* Is p a constant of exactly the normalised shape x.shape[axis:]? */
static bool norm_param_direct(const Node *n, const Node *p) {
  if (!is_const_leaf(p) || p->dtype != DT_F32 || p->shape.rank != n->shape.rank - n->a.axis) return false;
  for (int i = 0; i < p->shape.rank; i++)
    if (p->shape.dim[i] != n->shape.dim[n->a.axis + i]) return false;
  return true;
}

/* A binary op of a composition producing node n's type and shape; named as n when last. */
static const char *compose2(Lower *L, const Node *n, const char *type, const char *x, const char *y, bool last) {
  MilOp *op = last ? start(L, n, type) : step(L, n, type);
  mil_arg(L->m, op, "x", x);
  mil_arg(L->m, op, "y", y);
  if (last) {
    finish(L, n, op);
    return L->val[n->id];
  }
  return mil_result(L->m, op, mil_type(L, n->dtype), &n->shape);
}

/* |x| on int32 as maximum(x, x * -1): MIL documents abs for floats only; with int32's
 * wrap, abs(INT32_MIN) stays INT32_MIN, as the op table's iexpr gives. */
static void lower_abs_i32(Lower *L, const Node *n) {
  const char *x = X(L, n, 0);
  const char *neg = compose2(L, n, "mul", x, mil_scalar_int(L->m, param_name(n, "abs", "minus_one"), -1), false);
  compose2(L, n, "maximum", x, neg, true);
}

/* One intermediate MIL op of node n with up to three named arguments (NULL ends them),
 * typed t and shaped s. */
static const char *sd_op(Lower *L, const Node *n, const char *type, const char *const *args, MilType t, const Shape *s) {
  MilOp *op = step(L, n, type);
  for (int i = 0; args[i]; i += 2) mil_arg(L->m, op, args[i], args[i + 1]);
  return mil_result(L->m, op, t, s);
}

static const char *op2(Lower *L, const char *type, const char *base, const char *x, const char *y, MilType t,
                       const Shape *s);

/* Whether n is a constant without a zero element. */
static bool const_nonzero(const Node *n) {
  if (!is_const_leaf(n) || (n->dtype != DT_F32 && n->dtype != DT_I32)) return false;
  const void *v = node_data(n);
  for (int64_t i = 0; i < shape_numel(&n->shape); i++)
    if (n->dtype == DT_F32 ? ((const float *)v)[i] == 0.0f : ((const int32_t *)v)[i] == 0) return false;
  return true;
}

/* remainder -> MIL mod, floor-based with the sign of y as torch.remainder (coremltools'
 * reference evaluates it as numpy's %). MIL leaves y = 0 undefined, where Kiln gives 0
 * (i32) or NaN (f32): unless y is a constant without a zero, the mod divides by 1 there
 * (select) and its result is replaced by that value. */
static void lower_remainder(Lower *L, const Node *n) {
  const Node *y = in_node(L, n, 1);
  const char *xv = X(L, n, 0), *yv = X(L, n, 1);
  if (const_nonzero(y)) {
    compose2(L, n, "mod", xv, yv, true);
    return;
  }
  bool i = n->dtype == DT_I32;
  MilType t = mil_type(L, n->dtype);
  const char *zero = i ? mil_scalar_int(L->m, param_name(n, "equal", "y"), 0) : mil_scalar_float(L->m, param_name(n, "equal", "y"), t, 0.0f);
  const char *one = i ? mil_scalar_int(L->m, param_name(n, "select", "a"), 1) : mil_scalar_float(L->m, param_name(n, "select", "a"), t, 1.0f);
  const char *fill = i ? zero : mil_scalar_float(L->m, param_name(n, "select", "a"), t, NAN);
  const char *z = sd_op(L, n, "equal", (const char *const[]){"x", yv, "y", zero, NULL}, MIL_BOOL, &y->shape);
  const char *safe = sd_op(L, n, "select", (const char *const[]){"cond", z, "a", one, "b", yv, NULL}, t, &y->shape);
  const char *r = compose2(L, n, "mod", xv, safe, false);
  MilOp *op = start(L, n, "select");
  mil_arg(L->m, op, "cond", z);
  mil_arg(L->m, op, "a", fill);
  mil_arg(L->m, op, "b", r);
  finish(L, n, op);
}

/* x reshaped to the given dims (an intermediate of n). */
static const char *sd_reshape(Lower *L, const Node *n, const char *x, const Shape *s) {
  int32_t d[KILN_MAX_RANK];
  for (int i = 0; i < s->rank; i++) d[i] = (int32_t)s->dim[i];
  const char *args[] = {"x", x, "shape", mil_ints(L->m, param_name(n, "reshape", "shape"), d, s->rank), NULL};
  return sd_op(L, n, "reshape", args, L->ft, s);
}

/* The keys sdpa n without a window lets row i see, as a bool mask [T, S]: j < lim,
 * lim = clamp(len, 0, S), and j < pos + i + 1 when causal; *any gets, per row, 1 or 0
 * (the program's float type, [T, 1]): whether the row sees a key at all. */
static const char *sdpa_mask_prefix(Lower *L, const Node *n, int64_t T, int64_t S, const char **any) {
  Shape row = {2, {T, 1}}, mask = {2, {T, S}}, scalar = {0}, cs = {1, {S}};
  const char *a3[] = {"x", X(L, n, 3), "y", mil_scalar_int(L->m, param_name(n, "maximum", "zero"), 0), NULL};
  const char *lim = sd_op(L, n, "maximum", a3, MIL_I32, &scalar);
  const char *a4[] = {"x", lim, "y", mil_scalar_int(L->m, param_name(n, "minimum", "s"), (int32_t)S), NULL};
  lim = sd_op(L, n, "minimum", a4, MIL_I32, &scalar);
  int32_t *rows = kiln_alloc(sizeof(int32_t) * (size_t)T), *cols = kiln_alloc(sizeof(int32_t) * (size_t)S);
  for (int64_t i = 0; i < T; i++) rows[i] = (int32_t)(i + 1);
  for (int64_t j = 0; j < S; j++) cols[j] = (int32_t)j;
  const char *a5[] = {"x", X(L, n, 4), "y", mil_const_int(L->m, param_name(n, "add", "rows"), &row, rows), NULL};
  const char *per_row = sd_op(L, n, "add", a5, MIL_I32, &row);                 /* pos + i + 1 */
  if (!n->a.causal) {
    const char *a6[] = {"x", per_row, "y", mil_scalar_int(L->m, param_name(n, "mul", "zero"), 0), NULL};
    per_row = sd_op(L, n, "mul", a6, MIL_I32, &row);                          /* [T, 1] of 0 */
    const char *a7[] = {"x", per_row, "y", lim, NULL};
    per_row = sd_op(L, n, "add", a7, MIL_I32, &row);                          /* [T, 1] of lim */
  } else {
    const char *a7[] = {"x", per_row, "y", lim, NULL};
    per_row = sd_op(L, n, "minimum", a7, MIL_I32, &row);
  }
  const char *a8[] = {"x", mil_const_int(L->m, param_name(n, "less", "keys"), &cs, cols), "y", per_row, NULL};
  const char *m = sd_op(L, n, "less", a8, MIL_BOOL, &mask);
  const char *a12[] = {"x", per_row, "y", mil_scalar_int(L->m, param_name(n, "greater", "zero"), 0), NULL};
  *any = sd_op(L, n, "greater", a12, MIL_BOOL, &row);
  const char *a13[] = {"x", *any, "dtype", mil_const_str(L->m, param_name(n, "cast", "dtype"), cast_name(L->ft)), NULL};
  *any = sd_op(L, n, "cast", a13, L->ft, &row);
  return m;
}

/* The keys sdpa n with window W lets row i see, in a ring of S slots (docs/ops.md): slot
 * s holds position p_s = last - ((last - s) mod S), last = max(len - 1, -1), the newest
 * position written there (so len - S <= p_s <= len - 1 by construction); row i sees it
 * when max(pos + i - W + 1, 0) <= p_s <= pos + i. The mod's operands are kept
 * non-negative ((last + S - s) mod S), where every convention agrees. *any as in
 * sdpa_mask_prefix, from the mask itself. */
static const char *sdpa_mask_ring(Lower *L, const Node *n, int64_t T, int64_t S, const char **any) {
  Shape row = {2, {T, 1}}, mask = {2, {T, S}}, scalar = {0}, cs = {1, {S}};
  int32_t *rows = kiln_alloc(sizeof(int32_t) * (size_t)T), *cols = kiln_alloc(sizeof(int32_t) * (size_t)S);
  for (int64_t i = 0; i < T; i++) rows[i] = (int32_t)i;
  for (int64_t j = 0; j < S; j++) cols[j] = (int32_t)j;
  const char *last = op2(L, "add", base_name(n, "last"), X(L, n, 3), mil_scalar_int(L->m, param_name(n, "add", "minus1"), -1),
                         MIL_I32, &scalar);
  last = op2(L, "maximum", base_name(n, "last"), last, mil_scalar_int(L->m, param_name(n, "maximum", "minus1"), -1), MIL_I32,
             &scalar);
  const char *d = op2(L, "add", base_name(n, "ahead"), last, mil_scalar_int(L->m, param_name(n, "add", "s"), (int32_t)S),
                      MIL_I32, &scalar);
  d = op2(L, "sub", base_name(n, "ahead"), d, mil_const_int(L->m, param_name(n, "sub", "slots"), &cs, cols), MIL_I32, &cs);
  d = op2(L, "mod", base_name(n, "age"), d, mil_scalar_int(L->m, param_name(n, "mod", "s"), (int32_t)S), MIL_I32, &cs);
  const char *ps = op2(L, "sub", base_name(n, "slot_pos"), last, d, MIL_I32, &cs);          /* p_s */
  const char *qp = op2(L, "add", base_name(n, "row_pos"), X(L, n, 4), mil_const_int(L->m, param_name(n, "add", "rows"), &row, rows),
                       MIL_I32, &row);                                                         /* pos + i */
  const char *lo = op2(L, "add", base_name(n, "window_start"), qp,
                       mil_scalar_int(L->m, param_name(n, "add", "window"), i32(n, 1 - (int64_t)n->a.window)), MIL_I32, &row);
  lo = op2(L, "maximum", base_name(n, "window_start"), lo, mil_scalar_int(L->m, param_name(n, "maximum", "zero"), 0), MIL_I32, &row);
  const char *ge = op2(L, "greater_equal", base_name(n, "in_window"), ps, lo, MIL_BOOL, &mask);
  const char *le = op2(L, "less_equal", base_name(n, "causal"), ps, qp, MIL_BOOL, &mask);
  const char *m = op2(L, "logical_and", base_name(n, "visible"), ge, le, MIL_BOOL, &mask);
  const char *a1[] = {"x", m, "dtype", mil_const_str(L->m, param_name(n, "cast", "dtype"), cast_name(L->ft)), NULL};
  const char *f = sd_op(L, n, "cast", a1, L->ft, &mask);
  int32_t axis = -1;
  const char *a2[] = {"x", f, "axes", mil_ints(L->m, param_name(n, "reduce_max", "axes"), &axis, 1), "keep_dims",
                      mil_scalar_bool(L->m, param_name(n, "reduce_max", "keep_dims"), true), NULL};
  *any = sd_op(L, n, "reduce_max", a2, L->ft, &row);
  return m;
}

/* sdpa as MIL (Core ML may mask where C and Metal loop): q [HQ,T,D] viewed as
 * [HKV,G,T,D] against k, v viewed as [HKV,1,S,D], so matmul broadcasts the G query heads
 * of a group over their kv head without a copy; scores * scale; the keys a row may not
 * see (sdpa_mask_prefix, or sdpa_mask_ring with a window) masked to a large negative
 * value before softmax; rows that see no key multiplied by 0; reshaped back. */
static void lower_sdpa(Lower *L, const Node *n) {
  const Shape *qs = &in_node(L, n, 0)->shape, *ks = &in_node(L, n, 1)->shape;
  int64_t HQ = qs->dim[0], T = qs->dim[1], D = qs->dim[2], HKV = ks->dim[0], S = ks->dim[1], G = HQ / HKV;
  Shape q4 = {4, {HKV, G, T, D}}, k4 = {4, {HKV, 1, S, D}}, sc = {4, {HKV, G, T, S}};
  const char *q = sd_reshape(L, n, X(L, n, 0), &q4), *k = sd_reshape(L, n, X(L, n, 1), &k4);
  const char *v = sd_reshape(L, n, X(L, n, 2), &k4);
  const char *a1[] = {"x", q, "y", k, "transpose_x", mil_scalar_bool(L->m, param_name(n, "matmul", "transpose_x"), false),
                      "transpose_y", mil_scalar_bool(L->m, param_name(n, "matmul", "transpose_y"), true), NULL};
  const char *s = sd_op(L, n, "matmul", a1, L->ft, &sc);
  const char *a2[] = {"x", s, "y", mil_scalar_float(L->m, param_name(n, "mul", "scale"), L->ft, n->a.scale), NULL};
  s = sd_op(L, n, "mul", a2, L->ft, &sc);
  const char *any;
  const char *m = n->a.window > 0 ? sdpa_mask_ring(L, n, T, S, &any) : sdpa_mask_prefix(L, n, T, S, &any);
  float big = L->ft == MIL_F16 ? -65504.0f : -3.0e38f;   /* exp(big - max) is 0; finite, so no inf - inf */
  const char *a9[] = {"cond", m, "a", s, "b", mil_scalar_float(L->m, param_name(n, "select", "masked"), L->ft, big), NULL};
  s = sd_op(L, n, "select", a9, L->ft, &sc);
  const char *a10[] = {"x", s, "axis", mil_scalar_int(L->m, param_name(n, "softmax", "axis"), -1), NULL};
  s = sd_op(L, n, "softmax", a10, L->ft, &sc);
  const char *a11[] = {"x", s, "y", v, "transpose_x", mil_scalar_bool(L->m, param_name(n, "matmul", "transpose_x"), false),
                       "transpose_y", mil_scalar_bool(L->m, param_name(n, "matmul", "transpose_y"), false), NULL};
  const char *o = sd_op(L, n, "matmul", a11, L->ft, &q4);
  const char *a14[] = {"x", o, "y", any, NULL};
  o = sd_op(L, n, "mul", a14, L->ft, &q4);
  int32_t out[3] = {(int32_t)HQ, (int32_t)T, (int32_t)D};
  const char *sv = mil_ints(L->m, param_name(n, "reshape", "shape"), out, 3);
  MilOp *op = start(L, n, "reshape");
  mil_arg(L->m, op, "x", o);
  mil_arg(L->m, op, "shape", sv);
  finish(L, n, op);
}

/* layer_norm over dims axis..end; gamma/beta go in directly when they are constants
 * of the normalised shape, otherwise they are applied after it with mul/add. */
static void lower_layernorm(Lower *L, const Node *n) {
  const Node *gm = n->nin > 1 ? in_node(L, n, 1) : NULL, *bt = n->nin > 2 ? in_node(L, n, 2) : NULL;
  bool direct = (!gm || norm_param_direct(n, gm)) && (!bt || norm_param_direct(n, bt));
  int32_t axes[KILN_MAX_RANK];
  int na = norm_axes(n, axes);
  const char *xv = X(L, n, 0);
  const char *gv = gm ? X(L, n, 1) : NULL, *bv = bt ? X(L, n, 2) : NULL;
  const char *av = mil_ints(L->m, param_name(n, "layer_norm", "axes"), axes, na);
  const char *ep = mil_scalar_float(L->m, param_name(n, "layer_norm", "epsilon"), L->ft, n->a.eps);
  bool last = direct || (!gm && !bt);
  MilOp *op = last ? start(L, n, "layer_norm") : step(L, n, "layer_norm");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "axes", av);
  if (direct && gv) mil_arg(L->m, op, "gamma", gv);
  if (direct && bv) mil_arg(L->m, op, "beta", bv);
  mil_arg(L->m, op, "epsilon", ep);
  if (last) {
    finish(L, n, op);
    return;
  }
  const char *y = mil_result(L->m, op, mil_type(L, n->dtype), &n->shape);
  if (gv) y = compose2(L, n, "mul", y, gv, !bv);
  if (bv) compose2(L, n, "add", y, bv, true);
}

/* rmsnorm = x * rsqrt(reduce_mean(x*x, axes, keep_dims) + eps) [* gamma]; MIL's
 * rsqrt adds its epsilon to x, which is exactly the + eps. */
static void lower_rmsnorm(Lower *L, const Node *n) {
  const char *xv = X(L, n, 0), *gv = n->nin > 1 ? X(L, n, 1) : NULL;
  int32_t axes[KILN_MAX_RANK];
  int na = norm_axes(n, axes);
  Shape ms = n->shape;
  for (int i = 0; i < na; i++) ms.dim[axes[i]] = 1;
  MilType t = mil_type(L, n->dtype);
  const char *sq = compose2(L, n, "mul", xv, xv, false);
  const char *av = mil_ints(L->m, param_name(n, "reduce_mean", "axes"), axes, na);
  const char *kd = mil_scalar_bool(L->m, param_name(n, "reduce_mean", "keep_dims"), true);
  MilOp *op = step(L, n, "reduce_mean");
  mil_arg(L->m, op, "x", sq);
  mil_arg(L->m, op, "axes", av);
  mil_arg(L->m, op, "keep_dims", kd);
  const char *mean = mil_result(L->m, op, t, &ms);
  const char *ep = mil_scalar_float(L->m, param_name(n, "rsqrt", "epsilon"), L->ft, n->a.eps);
  op = step(L, n, "rsqrt");
  mil_arg(L->m, op, "x", mean);
  mil_arg(L->m, op, "epsilon", ep);
  const char *r = mil_result(L->m, op, t, &ms);
  const char *y = compose2(L, n, "mul", xv, r, !gv);
  if (gv) compose2(L, n, "mul", y, gv, true);
}

/* batch_norm when x has rank 3..5 and the four statistics are constant [C] vectors;
 * otherwise (x - mean) * (gamma * rsqrt(var + eps)) + beta on [1, C, 1...] views. */
static void lower_batchnorm(Lower *L, const Node *n) {
  const Node *x = in_node(L, n, 0);
  int64_t c = x->shape.rank >= 2 ? x->shape.dim[1] : 0;
  bool direct = x->shape.rank >= 3 && x->shape.rank <= 5;
  for (int i = 1; i < 5; i++) {
    const Node *p = in_node(L, n, i);
    direct &= is_const_leaf(p) && p->shape.rank == 1 && p->shape.dim[0] == c;
  }
  if (direct) {
    const char *v[5];
    for (int i = 0; i < 5; i++) v[i] = X(L, n, i);
    const char *ep = mil_scalar_float(L->m, param_name(n, "batch_norm", "epsilon"), L->ft, n->a.eps);
    MilOp *op = start(L, n, "batch_norm");
    static const char *const params[] = {"x", "mean", "variance", "gamma", "beta"};
    for (int i = 0; i < 5; i++) mil_arg(L->m, op, params[i], v[i]);
    mil_arg(L->m, op, "epsilon", ep);
    finish(L, n, op);
    return;
  }
  int rank = x->shape.rank;
  const char *xv = X(L, n, 0);
  const char *mean = per_channel(L, n, in_node(L, n, 1), rank), *var = per_channel(L, n, in_node(L, n, 2), rank);
  const char *gam = per_channel(L, n, in_node(L, n, 3), rank), *bet = per_channel(L, n, in_node(L, n, 4), rank);
  Shape cs = {.rank = rank};
  for (int i = 0; i < rank; i++) cs.dim[i] = i == 1 ? c : 1;
  const char *ep = mil_scalar_float(L->m, param_name(n, "rsqrt", "epsilon"), L->ft, n->a.eps);
  MilOp *op = step(L, n, "rsqrt");
  mil_arg(L->m, op, "x", var);
  mil_arg(L->m, op, "epsilon", ep);
  const char *r = mil_result(L->m, op, L->ft, &cs);
  op = step(L, n, "mul");
  mil_arg(L->m, op, "x", r);
  mil_arg(L->m, op, "y", gam);
  const char *scale = mil_result(L->m, op, L->ft, &cs);
  const char *d = compose2(L, n, "sub", xv, mean, false);
  const char *y = compose2(L, n, "mul", d, scale, false);
  compose2(L, n, "add", y, bet, true);
}

/* ---- data movement ---- */

/* reshape (a view in Kiln) -> MIL reshape to n's static shape; dims must fit int32. */
static void lower_reshape(Lower *L, const Node *n) {
  int32_t shp[KILN_MAX_RANK];
  for (int i = 0; i < n->shape.rank; i++) shp[i] = i32(n, n->shape.dim[i]);
  const char *xv = X(L, n, 0);
  const char *sv = mil_ints(L->m, param_name(n, "reshape", "shape"), shp, n->shape.rank);
  MilOp *op = start(L, n, "reshape");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "shape", sv);
  finish(L, n, op);
}

/* transpose -> MIL transpose with the same perm. */
static void lower_transpose(Lower *L, const Node *n) {
  int32_t perm[KILN_MAX_RANK];
  for (int i = 0; i < n->shape.rank; i++) perm[i] = n->a.perm[i];
  const char *xv = X(L, n, 0);
  const char *pv = mil_ints(L->m, param_name(n, "transpose", "perm"), perm, n->shape.rank);
  MilOp *op = start(L, n, "transpose");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "perm", pv);
  finish(L, n, op);
}

/* concat -> MIL concat of all inputs along a.axis, interleave false. */
static void lower_concat(Lower *L, const Node *n) {
  const char **vs = kiln_alloc(sizeof *vs * (size_t)n->nin);
  for (int i = 0; i < n->nin; i++) vs[i] = X(L, n, i);
  const char *ax = mil_scalar_int(L->m, param_name(n, "concat", "axis"), n->a.axis);
  const char *il = mil_scalar_bool(L->m, param_name(n, "concat", "interleave"), false);
  MilOp *op = start(L, n, "concat");
  mil_args(L->m, op, "values", vs, n->nin);
  mil_arg(L->m, op, "axis", ax);
  mil_arg(L->m, op, "interleave", il);
  finish(L, n, op);
}

/* slice -> MIL slice_by_index with explicit begin/end/stride and all masks false
 * (Kiln's attrs are already normalised and in range); values must fit int32. */
static void lower_slice(Lower *L, const Node *n) {
  int r = n->shape.rank;
  int32_t b[KILN_MAX_RANK], e[KILN_MAX_RANK], s[KILN_MAX_RANK];
  uint8_t no[KILN_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) b[i] = i32(n, n->a.start[i]), e[i] = i32(n, n->a.end[i]), s[i] = i32(n, n->a.step[i]);
  const char *xv = X(L, n, 0);
  const char *bv = mil_ints(L->m, param_name(n, "slice_by_index", "begin"), b, r);
  const char *ev = mil_ints(L->m, param_name(n, "slice_by_index", "end"), e, r);
  const char *sv = mil_ints(L->m, param_name(n, "slice_by_index", "stride"), s, r);
  const char *bm = mil_bools(L->m, param_name(n, "slice_by_index", "begin_mask"), no, r);
  const char *em = mil_bools(L->m, param_name(n, "slice_by_index", "end_mask"), no, r);
  const char *sm = mil_bools(L->m, param_name(n, "slice_by_index", "squeeze_mask"), no, r);
  MilOp *op = start(L, n, "slice_by_index");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "begin", bv);
  mil_arg(L->m, op, "end", ev);
  mil_arg(L->m, op, "stride", sv);
  mil_arg(L->m, op, "begin_mask", bm);
  mil_arg(L->m, op, "end_mask", em);
  mil_arg(L->m, op, "squeeze_mask", sm);
  finish(L, n, op);
}

/* An int32 value of n's shape-like operand clamped into [0, hi]: maximum with 0,
 * minimum with hi (MIL's gathers leave out-of-range indices undefined; Kiln's kernels
 * clamp). */
static const char *clamp_indices(Lower *L, const Node *n, const char *iv, const Shape *s, int32_t hi) {
  const char *lo = mil_scalar_int(L->m, param_name(n, "maximum", "y"), 0);
  MilOp *mx = step(L, n, "maximum");
  mil_arg(L->m, mx, "x", iv);
  mil_arg(L->m, mx, "y", lo);
  const char *a = mil_result(L->m, mx, MIL_I32, s);
  const char *top = mil_scalar_int(L->m, param_name(n, "minimum", "y"), hi);
  MilOp *mn = step(L, n, "minimum");
  mil_arg(L->m, mn, "x", a);
  mil_arg(L->m, mn, "y", top);
  return mil_result(L->m, mn, MIL_I32, s);
}

/* gather (MIL gather along a.axis; batch_dims written from iOS16) and gather_elements
 * (MIL gather_along_axis), on indices clamped into [0, n - 1] as Kiln's kernels clamp them
 * (MIL leaves an index out of range undefined, a negative one counting from the end);
 * validate_indices written from iOS17. MIL's gathers take no bool data, so bool tables go
 * through int32. */
static void lower_gather(Lower *L, const Node *n) {
  const bool along = n->op == OP_GATHER_ELEMENTS;
  const char *type = along ? "gather_along_axis" : "gather";
  const Node *x = in_node(L, n, 0), *ix = in_node(L, n, 1);
  const char *xv = X(L, n, 0);
  const char *iv = clamp_indices(L, n, X(L, n, 1), &ix->shape, i32(n, x->shape.dim[n->a.axis] - 1));
  bool b = x->dtype == DT_BOOL;
  if (b) xv = cast_step(L, n, xv, "cast", MIL_I32, &x->shape);
  const char *ax = mil_scalar_int(L->m, param_name(n, type, "axis"), n->a.axis);
  const char *bd = !along && L->spec >= 7 ? mil_scalar_int(L->m, param_name(n, type, "batch_dims"), 0) : NULL;
  const char *vi = L->spec >= 8 ? mil_scalar_bool(L->m, param_name(n, type, "validate_indices"), false) : NULL;
  MilOp *op = open_via_i32(L, n, type, b);
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "indices", iv);
  mil_arg(L->m, op, "axis", ax);
  if (bd) mil_arg(L->m, op, "batch_dims", bd);
  if (vi) mil_arg(L->m, op, "validate_indices", vi);
  close_via_i32(L, n, op, b, "dtype");
}

/* scatter -> MIL scatter_along_axis, index_copy -> MIL scatter (both iOS15, mode
 * "update"; validate_indices written from iOS17 as for gather); bool x and source
 * through int32. MIL leaves duplicate targets and out-of-range indices undefined:
 * Kiln's kernels let the last duplicate win and skip out-of-range indices, which our
 * evaluator checks the lowering against (docs/ops.md). */
static void lower_scatter(Lower *L, const Node *n) {
  const Node *x = in_node(L, n, 0), *src = in_node(L, n, 2);
  const char *type = n->op == OP_SCATTER ? "scatter_along_axis" : "scatter";
  const char *xv = X(L, n, 0), *iv = X(L, n, 1), *sv = X(L, n, 2);
  bool b = x->dtype == DT_BOOL;
  if (b) {
    xv = cast_step(L, n, xv, "cast", MIL_I32, &x->shape);
    sv = cast_step(L, n, sv, "cast_src", MIL_I32, &src->shape);   /* mil_op makes its name unique */
  }
  const char *ax = mil_scalar_int(L->m, param_name(n, type, "axis"), n->a.axis);
  const char *mode = mil_const_str(L->m, param_name(n, type, "mode"), "update");
  const char *vi = L->spec >= 8 ? mil_scalar_bool(L->m, param_name(n, type, "validate_indices"), false) : NULL;
  MilOp *op = open_via_i32(L, n, type, b);
  mil_arg(L->m, op, "data", xv);
  mil_arg(L->m, op, "indices", iv);
  mil_arg(L->m, op, "updates", sv);
  mil_arg(L->m, op, "axis", ax);
  mil_arg(L->m, op, "mode", mode);
  if (vi) mil_arg(L->m, op, "validate_indices", vi);
  close_via_i32(L, n, op, b, "dtype_out");
}

/* topk -> MIL argsort (iOS15; int32 indices of the whole line, descending for the
 * largest first), then slice_by_index to the first k along the axis when k < n. MIL
 * documents neither the order of equal values nor where a NaN goes: Kiln's rule (by
 * index; NaN above every number) is what tests/coreml/milrun.c implements, unverified
 * on a device (docs/ops.md). A single-output op on purpose: MIL's topk has two. */
static void lower_topk(Lower *L, const Node *n) {
  const Node *x = in_node(L, n, 0);
  int ax = n->a.axis, r = x->shape.rank;
  bool whole = n->a.k == x->shape.dim[ax];
  const char *xv = X(L, n, 0);
  const char *av = mil_scalar_int(L->m, param_name(n, "argsort", "axis"), ax);
  const char *asc = mil_scalar_bool(L->m, param_name(n, "argsort", "ascending"), !n->a.largest);
  MilOp *op = whole ? start(L, n, "argsort") : step(L, n, "argsort");
  mil_arg(L->m, op, "x", xv);
  mil_arg(L->m, op, "axis", av);
  mil_arg(L->m, op, "ascending", asc);
  if (whole) {
    finish(L, n, op);
    return;
  }
  const char *sorted = mil_result(L->m, op, MIL_I32, &x->shape);
  int32_t b[KILN_MAX_RANK], e[KILN_MAX_RANK], st[KILN_MAX_RANK];
  uint8_t no[KILN_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) b[i] = 0, st[i] = 1, e[i] = i32(n, i == ax ? n->a.k : x->shape.dim[i]);
  const char *bv = mil_ints(L->m, param_name(n, "slice_by_index", "begin"), b, r);
  const char *ev = mil_ints(L->m, param_name(n, "slice_by_index", "end"), e, r);
  const char *sv = mil_ints(L->m, param_name(n, "slice_by_index", "stride"), st, r);
  const char *bm = mil_bools(L->m, param_name(n, "slice_by_index", "begin_mask"), no, r);
  const char *em = mil_bools(L->m, param_name(n, "slice_by_index", "end_mask"), no, r);
  const char *sm = mil_bools(L->m, param_name(n, "slice_by_index", "squeeze_mask"), no, r);
  MilOp *sl = start(L, n, "slice_by_index");
  mil_arg(L->m, sl, "x", sorted);
  mil_arg(L->m, sl, "begin", bv);
  mil_arg(L->m, sl, "end", ev);
  mil_arg(L->m, sl, "stride", sv);
  mil_arg(L->m, sl, "begin_mask", bm);
  mil_arg(L->m, sl, "end_mask", em);
  mil_arg(L->m, sl, "squeeze_mask", sm);
  finish(L, n, sl);
}

/* ---- state (iOS18) ----
 *
 * A Kiln state is a function input of MIL type state<tensor<fp16, shape>>: Core ML
 * keeps states in fp16 only, whatever the program's precision (f32 states round to
 * fp16 between calls; bool states hold 0/1). A STATE leaf is `read_state` at the top of
 * the function, before any write, so a read traced after a write (tests/state/order.lua)
 * still sees the value the call found: MIL's read_state returns a copy. A WRITE is
 * coremltools' in-place pattern: slice_update of the previous version at the offset,
 * write_state of the result, and read_state again when a later op reads the new
 * version (coremltools' coreml_update_state is saved as exactly that pair).
 */

/* v (of MIL type from, shape s) as type to: a cast named after n, or v itself. */
static const char *cast_to(Lower *L, const Node *n, const char *v, MilType from, MilType to, const Shape *s) {
  return from == to ? v : cast_step(L, n, v, "cast", to, s);
}

/* A state version as the program computes with it (fp32 in fp32 programs, bool for bool
 * states): a cast of its fp16 value, made where it is first needed. */
static const char *state_value(Lower *L, const Node *n) {
  if (!L->v16[n->id]) die("state version %%%d used before it was read", n->id);
  return cast_to(L, n, L->v16[n->id], MIL_F16, mil_type(L, n->dtype), &n->shape);
}

/* read_state of n's state: its current fp16 value, as a new MIL value named after n. */
static const char *read_state(Lower *L, const Node *n) {
  MilOp *op = step(L, n, "read_state");
  mil_arg(L->m, op, "input", L->state_in[n->a.state]);
  return mil_result(L->m, op, MIL_F16, &n->shape);
}

/* One binary MIL op of two named values, its output typed (t, s). */
static const char *op2(Lower *L, const char *type, const char *base, const char *x, const char *y, MilType t,
                       const Shape *s) {
  MilOp *op = mil_op(L->m, type, base, false);
  mil_arg(L->m, op, "x", x);
  mil_arg(L->m, op, "y", y);
  return mil_result(L->m, op, t, s);
}

/* Reads, at the top of the function, every state the entry reads. */
static void read_states(Lower *L) {
  for (int i = 0; i < L->g->nnodes; i++) {
    Node *n = L->g->nodes[i];
    if (!n->dead && n->op == OP_STATE && L->uses[i]) L->v16[i] = read_state(L, n);
  }
}

/* The largest offset at which write n fits: the state's length along the axis minus the
 * rows written (a ring write: any offset up to INT32_MAX). */
static int64_t write_max(const Lower *L, const Node *n) {
  if (n->a.ring) return INT32_MAX;   /* a ring takes any offset >= 0 */
  return n->shape.dim[n->a.axis] - in_node(L, n, 1)->shape.dim[n->a.axis];
}

/* Core ML cannot return <M>_E_RANGE, so the C target's check becomes data: for each
 * distinct (offset input, largest valid offset) among the writes, the offset clamped
 * into [0, max] (what the writes use, so no slice ever leaves its state) and whether
 * the clamp changed nothing; L->ok is the conjunction, and every write of the entry
 * stores its new rows only when it holds (lower_write). A call with an offset out of
 * range thus leaves every state as it was, as the C target does; its outputs mean
 * nothing. Constant offsets were checked by the frontend. */
static void range_checks(Lower *L) {
  Graph *g = L->g;
  const Node **seen = kiln_alloc(sizeof *seen * (size_t)(g->nnodes + 1));
  int64_t *seen_max = kiln_alloc(sizeof(int64_t) * (size_t)(g->nnodes + 1));
  const char **seen_at = kiln_alloc(sizeof(char *) * (size_t)(g->nnodes + 1));
  int nseen = 0;
  Shape scalar = {0};
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->op != OP_WRITE || in_node(L, n, 2)->op != OP_INPUT) continue;
    const Node *at = in_node(L, n, 2);
    int64_t max = write_max(L, n);
    for (int k = 0; k < nseen && !L->at[i]; k++)
      if (seen[k] == at && seen_max[k] == max) L->at[i] = seen_at[k];
    if (L->at[i]) continue;
    const char *name = g->inputs[at->io_index].name, *v = value(L, at->id);
    const char *lo = op2(L, "maximum", kiln_fmt("%s_at_least_0", name), v, mil_scalar_int(L->m, kiln_fmt("%s_zero", name), 0),
                         MIL_I32, &scalar);
    const char *c = op2(L, "minimum", kiln_fmt("%s_at_most_%lld", name, (long long)max), lo,
                        mil_scalar_int(L->m, kiln_fmt("%s_max_%lld", name, (long long)max), i32(n, max)), MIL_I32, &scalar);
    const char *eq = op2(L, "equal", kiln_fmt("%s_in_range", name), c, v, MIL_BOOL, &scalar);
    L->ok = L->ok ? op2(L, "logical_and", "offsets_in_range", L->ok, eq, MIL_BOOL, &scalar) : eq;
    seen[nseen] = at, seen_max[nseen] = max, seen_at[nseen++] = L->at[i] = c;
  }
}

/* A ring write (a.ring), which slice_update cannot express (its rows may wrap): slot s of
 * the N along the axis is d_s = (s - at) mod N rows past the offset, computed as
 * ((s + N - at mod N) mod N) so every mod sees non-negative operands; the slots with
 * d_s < ROWS (and L->ok, when an offset of the entry is out of range) take row d_s of the
 * value (a gather along the axis), the others keep the previous version (select); then
 * write_state, and read_state when a later op reads this version. */
static void lower_write_ring(Lower *L, const Node *n) {
  const Node *y = in_node(L, n, 1), *at = in_node(L, n, 2);
  const char *x16 = L->v16[n->in[0]];
  if (!x16) die("write %%%d: the version it updates was never read", n->id);
  int r = n->shape.rank, ax = n->a.axis;
  int64_t N = n->shape.dim[ax], ROWS = y->shape.dim[ax];
  Shape scalar = {0}, line = {1, {N}}, col = {r, {0}};
  for (int i = 0; i < r; i++) col.dim[i] = i == ax ? N : 1;
  int32_t *slots = kiln_alloc(sizeof(int32_t) * (size_t)N);
  for (int64_t j = 0; j < N; j++) slots[j] = (int32_t)(j + N);
  const char *yv = cast_to(L, n, X(L, n, 1), mil_type(L, y->dtype), MIL_F16, &y->shape);
  const char *a = at->op == OP_CONST ? mil_scalar_int(L->m, param_name(n, "ring", "at"), *(const int32_t *)at->data)
                                     : L->at[n->id];
  const char *nv = mil_scalar_int(L->m, param_name(n, "mod", "n"), i32(n, N));
  a = op2(L, "mod", base_name(n, "ring_at"), a, nv, MIL_I32, &scalar);
  const char *d = op2(L, "sub", base_name(n, "ring_row"), mil_const_int(L->m, param_name(n, "sub", "slots"), &line, slots), a,
                      MIL_I32, &line);
  d = op2(L, "mod", base_name(n, "ring_row"), d, nv, MIL_I32, &line);
  const char *hit = op2(L, "less", base_name(n, "ring_hit"), d, mil_scalar_int(L->m, param_name(n, "less", "rows"), i32(n, ROWS)),
                        MIL_BOOL, &line);
  if (L->ok) hit = op2(L, "logical_and", base_name(n, "ring_hit"), hit, L->ok, MIL_BOOL, &line);
  int32_t cd[KILN_MAX_RANK];
  for (int i = 0; i < r; i++) cd[i] = (int32_t)col.dim[i];
  const char *ra[] = {"x", hit, "shape", mil_ints(L->m, param_name(n, "reshape", "shape"), cd, r), NULL};
  hit = sd_op(L, n, "reshape", ra, MIL_BOOL, &col);     /* along the axis, to broadcast over the rest */
  const char *src = op2(L, "minimum", base_name(n, "ring_src"), d,
                        mil_scalar_int(L->m, param_name(n, "minimum", "last_row"), i32(n, ROWS - 1)), MIL_I32, &line);
  const char *gax = mil_scalar_int(L->m, param_name(n, "gather", "axis"), ax);   /* consts before the op using them */
  const char *bd = L->spec >= 7 ? mil_scalar_int(L->m, param_name(n, "gather", "batch_dims"), 0) : NULL;
  const char *vi = L->spec >= 8 ? mil_scalar_bool(L->m, param_name(n, "gather", "validate_indices"), false) : NULL;
  MilOp *op = step(L, n, "gather");
  mil_arg(L->m, op, "x", yv);
  mil_arg(L->m, op, "indices", src);
  mil_arg(L->m, op, "axis", gax);
  if (bd) mil_arg(L->m, op, "batch_dims", bd);
  if (vi) mil_arg(L->m, op, "validate_indices", vi);
  const char *rows = mil_result(L->m, op, MIL_F16, &n->shape);
  op = step(L, n, "select");
  mil_arg(L->m, op, "cond", hit);
  mil_arg(L->m, op, "a", rows);
  mil_arg(L->m, op, "b", x16);
  const char *nv16 = mil_result(L->m, op, MIL_F16, &n->shape);
  op = step(L, n, "write_state");          /* no output: it stores into the state */
  mil_arg(L->m, op, "input", L->state_in[n->a.state]);
  mil_arg(L->m, op, "data", nv16);
  if (L->uses[n->id]) L->v16[n->id] = read_state(L, n);
}

/* write -> slice_update of the previous version at the offset along a.axis (begin and
 * end computed from the clamped run-time offset, or constant), guarded by L->ok (the
 * rows already there are stored back when an offset is out of range), then write_state,
 * then read_state when a later op reads this version. stride, begin_mask, end_mask and
 * squeeze_mask are written explicitly, as coremltools' torch frontend does. */
static void lower_write(Lower *L, const Node *n) {
  if (n->a.ring) {
    lower_write_ring(L, n);
    return;
  }
  const Node *y = in_node(L, n, 1), *at = in_node(L, n, 2);
  const char *x16 = L->v16[n->in[0]];
  if (!x16) die("write %%%d: the version it updates was never read", n->id);
  int r = n->shape.rank, ax = n->a.axis;
  int32_t len[KILN_MAX_RANK], b[KILN_MAX_RANK] = {0}, ones[KILN_MAX_RANK];
  uint8_t no[KILN_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) len[i] = i32(n, y->shape.dim[i]), ones[i] = 1;
  Shape rs = {1, {r}};
  const char *yv = cast_to(L, n, X(L, n, 1), mil_type(L, y->dtype), MIL_F16, &y->shape), *begin, *end;
  if (at->op == OP_CONST) {
    int32_t e[KILN_MAX_RANK];
    b[ax] = *(const int32_t *)at->data;
    for (int i = 0; i < r; i++) e[i] = b[i] + len[i];
    begin = mil_ints(L->m, param_name(n, "slice_update", "begin"), b, r);
    end = mil_ints(L->m, param_name(n, "slice_update", "end"), e, r);
  } else {
    b[ax] = 1;
    const char *axis = mil_ints(L->m, param_name(n, "slice_update", "axis"), b, r);
    begin = op2(L, "mul", base_name(n, "begin"), axis, L->at[n->id], MIL_I32, &rs);
    end = op2(L, "add", base_name(n, "end"), begin, mil_ints(L->m, param_name(n, "slice_update", "rows"), len, r), MIL_I32, &rs);
  }
  const char *st = mil_ints(L->m, param_name(n, "slice_update", "stride"), ones, r);
  const char *bm = mil_bools(L->m, param_name(n, "slice_update", "begin_mask"), no, r);
  const char *em = mil_bools(L->m, param_name(n, "slice_update", "end_mask"), no, r);
  const char *sm = mil_bools(L->m, param_name(n, "slice_update", "squeeze_mask"), no, r);
  static const char *const params[] = {"begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask"};
  const char *pv[] = {begin, end, st, bm, em, sm};
  if (L->ok) {
    MilOp *op = step(L, n, "slice_by_index");
    mil_arg(L->m, op, "x", x16);
    for (int i = 0; i < 6; i++) mil_arg(L->m, op, params[i], pv[i]);
    const char *old = mil_result(L->m, op, MIL_F16, &y->shape);
    op = step(L, n, "select");
    mil_arg(L->m, op, "cond", L->ok);
    mil_arg(L->m, op, "a", yv);
    mil_arg(L->m, op, "b", old);
    yv = mil_result(L->m, op, MIL_F16, &y->shape);
  }
  MilOp *op = step(L, n, "slice_update");
  mil_arg(L->m, op, "x", x16);
  mil_arg(L->m, op, "update", yv);
  for (int i = 0; i < 6; i++) mil_arg(L->m, op, params[i], pv[i]);
  const char *nv = mil_result(L->m, op, MIL_F16, &n->shape);
  op = step(L, n, "write_state");          /* no output: it stores into the state */
  mil_arg(L->m, op, "input", L->state_in[n->a.state]);
  mil_arg(L->m, op, "data", nv);
  if (L->uses[n->id]) L->v16[n->id] = read_state(L, n);
}

/* ---- driver ---- */

/* Lowers one live non-leaf node by its op family, recording its MIL value in L->val.
 * Leaves return at once; an op family without a lowering is a user error at its line. */
static void lower_node(Lower *L, Node *n) {
  switch (kiln_ops[n->op].family) {
  case FAM_LEAF: return;                 /* inputs are bound up front, consts lazily */
  case FAM_VIEW: lower_reshape(L, n); return;
  case FAM_UNARY: lower_unary(L, n); return;
  case FAM_BINARY: lower_binary(L, n); return;
  case FAM_SELECT: lower_select(L, n); return;
  case FAM_CAST: lower_cast(L, n); return;
  case FAM_MATMUL: lower_matmul(L, n); return;
  case FAM_CONV: lower_conv(L, n); return;
  case FAM_POOL: lower_pool(L, n); return;
  case FAM_REDUCE: lower_reduce(L, n); return;
  case FAM_SOFTMAX: lower_softmax(L, n); return;
  case FAM_NORM: (n->op == OP_RMSNORM ? lower_rmsnorm : lower_layernorm)(L, n); return;
  case FAM_BATCHNORM: lower_batchnorm(L, n); return;
  case FAM_TRANSPOSE: lower_transpose(L, n); return;
  case FAM_CONCAT: lower_concat(L, n); return;
  case FAM_SLICE: lower_slice(L, n); return;
  case FAM_GATHER: lower_gather(L, n); return;
  case FAM_ATTENTION: lower_sdpa(L, n); return;
  case FAM_WRITE: lower_write(L, n); return;
  case FAM_ARGREDUCE: lower_argreduce(L, n); return;
  case FAM_GATHER_ELEMENTS: lower_gather(L, n); return;
  case FAM_TOPK: lower_topk(L, n); return;
  case FAM_CONV_TRANSPOSE: lower_conv_transpose(L, n); return;
  case FAM_SCATTER: lower_scatter(L, n); return;
  case FAM__COUNT: break;
  }
  kiln_error_at(n->loc, "%s: no Core ML lowering for this op", kiln_ops[n->op].name);
}

/* Counts live consumers of every node (graph outputs count too). */
static void count_uses(Lower *L) {
  Graph *g = L->g;
  for (int i = 0; i < g->nnodes; i++) L->user[i] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->nin; k++) {
      L->uses[n->in[k]]++;
      L->user[n->in[k]] = i;
    }
  }
  for (int i = 0; i < g->noutputs; i++) L->uses[g->outputs[i].node]++;
}

/* Core ML's limits, checked before anything is written (rank: coreml_fold_ranks):
 * I/O names that are MIL identifiers but not keywords. (Rank-0 I/O is fine: it is
 * exposed as shape [1], see coreml_io_shape.) */
static void check_limits(Lower *L) {
  Graph *g = L->g;
  for (int io = 0; io < 2; io++) {
    GraphIO *v = io ? g->outputs : g->inputs;
    for (int i = 0; i < (io ? g->noutputs : g->ninputs); i++) {
      Node *n = graph_node(g, v[i].node);
      const char *what = io ? "output" : "input";
      if (mil_is_keyword(v[i].name))
        kiln_error_at(n->loc, "%s name '%s' is a reserved word in Core ML's MIL; rename it", what, v[i].name);
      if (!mil_claim(L->m, v[i].name))
        kiln_error_at(n->loc, "%s name '%s' is not a valid MIL identifier or is used twice", what, v[i].name);
    }
  }
}

/* reshape of value v (type t) to shape s, named after base (exactly base if exact). */
static const char *reshape_value(Lower *L, const char *base, bool exact, const char *v, MilType t, const Shape *s) {
  int32_t shp[KILN_MAX_RANK];
  for (int i = 0; i < s->rank; i++) shp[i] = (int32_t)s->dim[i];
  const char *sv = mil_ints(L->m, kiln_fmt("%s_shape", exact ? base : kiln_fmt("%s_reshape", base)), shp, s->rank);
  MilOp *op = mil_op(L->m, "reshape", exact ? base : kiln_fmt("%s_reshape", base), exact);
  mil_arg(L->m, op, "x", v);
  mil_arg(L->m, op, "shape", sv);
  return mil_result(L->m, op, t, s);
}

/* Function inputs: f32 -> fp32 (cast to fp16 in fp16 programs), i32 and i64 -> int32
 * (i64's one reader, a cast to i32, becomes an identity), bool -> int32 cast to bool; a rank-0 input arrives as [1] and is reshaped to a
 * scalar first. */
static void bind_inputs(Lower *L) {
  Graph *g = L->g;
  for (int i = 0; i < g->ninputs; i++) {
    Node *n = graph_node(g, g->inputs[i].node);
    const char *name = g->inputs[i].name;
    MilType io = n->dtype == DT_F32 ? MIL_F32 : MIL_I32, t = mil_type(L, n->dtype);
    mil_input(L->m, name, io, coreml_io_shape(n));
    L->val[n->id] = name;
    if (L->uses[n->id] == 0) continue;
    if (n->shape.rank == 0) L->val[n->id] = reshape_value(L, name, false, name, io, &n->shape);
    if (io == t) continue;
    const char *dt = mil_const_str(L->m, kiln_fmt("%s_dtype", name), cast_name(t));
    MilOp *op = mil_op(L->m, "cast", kiln_fmt("%s_to_%s", name, cast_name(t)), false);
    mil_arg(L->m, op, "x", L->val[n->id]);
    mil_arg(L->m, op, "dtype", dt);
    L->val[n->id] = mil_result(L->m, op, t, &n->shape);
  }
}

/* Outputs whose op can carry the output's name directly (its type is already the
 * I/O type); the others get a final cast/identity named after the output. */
static void plan_outputs(Lower *L) {
  Graph *g = L->g;
  for (int i = 0; i < g->noutputs; i++) {
    Node *n = graph_node(g, g->outputs[i].node);
    MilType t = mil_type(L, n->dtype);
    if (kiln_ops[n->op].family != FAM_LEAF && (t == MIL_F32 || t == MIL_I32) && n->shape.rank > 0 && !L->exact[n->id])
      L->exact[n->id] = g->outputs[i].name;
  }
}

/* Each output's value under the output's exact name and I/O type: a final cast (or
 * identity) where the op could not carry it; a rank-0 value is cast if needed, then
 * reshaped to [1] under the name. */
static void bind_outputs(Lower *L) {
  Graph *g = L->g;
  for (int i = 0; i < g->noutputs; i++) {
    Node *n = graph_node(g, g->outputs[i].node);
    const char *name = g->outputs[i].name, *v = value(L, n->id);
    if (strcmp(v, name) != 0) {
      MilType t = mil_type(L, n->dtype), io = n->dtype == DT_F32 ? MIL_F32 : MIL_I32;
      bool scalar = n->shape.rank == 0;
      const char *dt = t != io ? mil_const_str(L->m, kiln_fmt("%s_dtype", name), cast_name(io)) : NULL;
      if (dt || !scalar) {
        MilOp *op = mil_op(L->m, dt ? "cast" : "identity", scalar ? kiln_fmt("%s_cast", name) : name, !scalar);
        mil_arg(L->m, op, "x", v);
        if (dt) mil_arg(L->m, op, "dtype", dt);
        v = mil_result(L->m, op, io, &n->shape);
      }
      if (scalar) reshape_value(L, name, true, v, io, coreml_io_shape(n));
    }
    mil_output(L->m, name);
  }
}

/* Claims the states' names in the current function, right after its I/O names (before
 * any op takes a name); they were made unique program-wide by state_names. */
static void claim_states(Lower *L, const Program *p) {
  for (int s = 0; s < p->nstates; s++)
    if (!mil_claim(L->m, L->state_in[s]))
      kiln_error_at(p->states[s].loc, "state %s is '%s' in Core ML, which entry '%s' also uses as an input or output name; "
                    "rename one", p->states[s].name, L->state_in[s], L->g->entry);
}

/* Function inputs for the program's states, after the ordinary inputs, every state in
 * every function (so each function's state signature, what Core ML's MLState holds, is
 * the same). */
static void bind_states(Lower *L, const Program *p) {
  for (int s = 0; s < p->nstates; s++) mil_state_input(L->m, L->state_in[s], &p->states[s].shape);
}

/* Lowers entry L->g into the current function of L->m: signature, state reads, range
 * checks, every live node in graph order, outputs. */
static void lower_entry(Lower *L, const Program *p) {
  Graph *g = L->g;
  count_uses(L);
  check_limits(L);
  claim_states(L, p);
  plan_outputs(L);
  bind_inputs(L);
  bind_states(L, p);
  read_states(L);
  range_checks(L);
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!n->dead && !L->done[i]) lower_node(L, n);
  }
  bind_outputs(L);
}

/* The CoreML target: lowers every entry to a MIL function for --min-os's opset (fp16 with
 * --fp16) over one weight.bin and writes the .mlpackage. A plain program is one function
 * "main", as before states existed; see coreml_model_message for the others. User errors (bad
 * --min-os, unsupported ops, limits) name the Lua line or flag; a protobuf size mismatch
 * dies. */
void emit_coreml(Program *p, const EmitOptions *o) {
  int os = -1;
  for (int i = 0; i < 4; i++)
    if (o->min_os && strcmp(o->min_os, os_table[i].os) == 0) os = i;
  if (os < 0) kiln_error("--min-os: one of iOS15, iOS16, iOS17, iOS18, not '%s'", o->min_os ? o->min_os : "");
  bool plain = program_is_plain(p), multi = p->explicit_entries;
  coreml_note_i64_inputs(p);
  if (!plain) coreml_check_program(p, os_table[os].spec, o);
  Mil *m = mil_new(os_table[os].opset);
  if (!plain) mil_share_blobs(m);
  const char **state_in = coreml_state_names(p);
  Lower *Ls = kiln_alloc(sizeof *Ls * (size_t)p->nentries);
  CwNotes *notes = coreml_weight_notes();
  for (int e = 0; e < p->nentries; e++) {
    Graph *g = p->entries[e];
    size_t nn = (size_t)g->nnodes + 1;
    Ls[e] = (Lower){.g = g, .m = m, .ft = o->fp16 ? MIL_F16 : MIL_F32, .spec = os_table[os].spec, .state_in = state_in,
                    .v16 = kiln_alloc(sizeof(char *) * nn), .at = kiln_alloc(sizeof(char *) * nn),
                    .val = kiln_alloc(sizeof(char *) * nn), .exact = kiln_alloc(sizeof(char *) * nn),
                    .uses = kiln_alloc(sizeof(int) * nn), .user = kiln_alloc(sizeof(int) * nn), .done = kiln_alloc(nn),
                    .raw = kiln_alloc(sizeof(char *) * nn), .rawt = kiln_alloc(sizeof(MilType) * nn), .notes = notes};
    mil_function(m, multi ? g->entry : "main");
    Shape *shapes = coreml_fold_ranks(g);   /* rank-6 values held folded to rank 5 while lowering */
    lower_entry(&Ls[e], p);
    coreml_unfold_ranks(g, shapes);
  }

  CoreML__Specification__Model *mdl = coreml_model_message(p, state_in, m, os_table[os].spec, multi, o);
  size_t size = core_ml__specification__model__get_packed_size(mdl);
  if (size >= (size_t)INT32_MAX)
    kiln_error("%s: model.mlmodel would be %zu bytes; a protobuf message must stay below 2 GiB", p->model, size);
  uint8_t *pb = kiln_alloc(size + 1);
  if (core_ml__specification__model__pack(mdl, pb) != size) die("protobuf-c packed a different size");
  coreml_write_package(p->model, m, o, pb, size);
  coreml_weight_report(notes, o->min_os, o->fp16 ? MIL_F16 : MIL_F32);
}
