/*
 * lua_ops.c — the op functions of the `kiln` Lua table and the tensor metatable.
 *
 * Each binding turns PyTorch-style arguments into the normalised attributes the
 * op table expects (kiln.h Attrs) and adds one or more nodes through fe_add:
 * negative dims count from the end, slice bounds are clamped as Python does,
 * stride/padding numbers are expanded to pairs and quadruples, reshape's -1 is
 * resolved, rank-1 matmul operands are reshaped as torch.matmul treats them and
 * the result reshaped back. Shape rules themselves live in shape.c; a binding
 * checks only what it must know to build the attributes (and gives friendlier
 * messages for linear). Every message starts with the op's name.
 *
 * Order matters for determinism: operands are converted one statement at a
 * time (never inside one initializer list, whose evaluation order C leaves
 * open), because converting a number creates a CONST node and node ids are
 * part of the output.
 */
#include "frontend.h"

#include <math.h>
#include <string.h>

/* ---- small helpers ---- */

/* Shorthands: the node, and its shape, behind tensor id (dies on a bad id). */
static Node *tnode(lua_State *L, int id) { return fe_node(L, id); }

static const Shape *tshape(lua_State *L, int id) { return &fe_node(L, id)->shape; }

/* Index of the options table argument at idx, or 0 when it is absent (nil). A key
 * not in allowed is an error naming the (alphabetically) first such key, so the
 * message does not depend on Lua's table order. */
static int opts_arg(lua_State *L, int idx, const char *op, const char *const *allowed) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx))
    return fe_error(L, "%s: argument %d must be an options table, got %s", op, idx, luaL_typename(L, idx)), 0;
  idx = lua_absindex(L, idx);
  const char *bad = NULL;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    bool ok = false;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (int i = 0; allowed[i]; i++) ok |= strcmp(allowed[i], lua_tostring(L, -1)) == 0;
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)";
    if (!ok && (!bad || strcmp(k, bad) < 0)) bad = kiln_strdup(k);
  }
  if (bad) {
    char list[256] = "";
    size_t k = 0;
    for (int i = 0; allowed[i] && k < sizeof list; i++) k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", allowed[i]);
    fe_error(L, "%s: unknown option '%s' (known: %s)", op, bad, list);
  }
  return idx;
}

/* Pushes option key of the table at idx (nil when idx is 0); returns its Lua type. */
static int opt(lua_State *L, int idx, const char *key) {
  if (!idx) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  return lua_getfield(L, idx, key);
}

/* Option key as a boolean (Lua truthiness), def when absent. */
static bool opt_bool(lua_State *L, int idx, const char *key, bool def) {
  int t = opt(L, idx, key);
  bool v = t == LUA_TNIL ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Option key as a number, def when absent. */
static double opt_number(lua_State *L, int idx, const char *key, double def, const char *op) {
  int t = opt(L, idx, key);
  if (t != LUA_TNIL && t != LUA_TNUMBER) fe_error(L, "%s: option %s must be a number, got %s", op, key, luaL_typename(L, -1));
  double v = t == LUA_TNIL ? def : lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Option key as an integer, def when absent. */
static int64_t opt_int(lua_State *L, int idx, const char *key, int64_t def, const char *op) {
  if (opt(L, idx, key) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  int64_t v = fe_int_arg(L, -1, op, key);
  lua_pop(L, 1);
  return v;
}

/* Reads the value at the top of the stack as n integers: a number (repeated) or
 * an array of exactly one of the lengths in lens (a 2-array repeated for 4). */
static void int_list(lua_State *L, const char *op, const char *what, int *out, int n) {
  if (lua_type(L, -1) == LUA_TNUMBER) {
    int64_t v = fe_int_arg(L, -1, op, what);
    if (v < -(1 << 20) || v > (1 << 20)) fe_error(L, "%s: %s value %lld is out of range", op, what, (long long)v);
    for (int i = 0; i < n; i++) out[i] = (int)v;
    return;
  }
  if (!lua_istable(L, -1)) fe_error(L, "%s: %s must be a number or an array, got %s", op, what, luaL_typename(L, -1));
  lua_Integer len = luaL_len(L, -1);
  if (!(len == 2 || (n == 4 && len == 4))) fe_error(L, "%s: %s must have %s entries", op, what, n == 4 ? "2 or 4" : "2");
  for (int i = 0; i < len; i++) {
    lua_geti(L, -1, i + 1);
    int64_t v = fe_int_arg(L, -1, op, what);
    if (v < -(1 << 20) || v > (1 << 20)) fe_error(L, "%s: %s value %lld is out of range", op, what, (long long)v);
    out[i] = (int)v;
    lua_pop(L, 1);
  }
  if (n == 4 && len == 2) out[2] = out[0], out[3] = out[1];
}

/* Option key as n ints (see int_list), def when absent. */
static void opt_ints(lua_State *L, int idx, const char *key, int def, int *out, int n, const char *op) {
  if (opt(L, idx, key) == LUA_TNIL) {
    for (int i = 0; i < n; i++) out[i] = def;
  } else {
    int_list(L, op, key, out, n);
  }
  lua_pop(L, 1);
}

/* A reshape node (or x itself when the shape is already s). */
static int reshape_to(lua_State *L, int x, const Shape *s) {
  if (shape_eq(tshape(L, x), s)) return x;
  Attrs a = {.reshape = *s};
  return fe_add(L, OP_RESHAPE, &x, 1, &a);
}

/* One-node helpers: the new node's id. */
static int unary(lua_State *L, OpKind op, int x) { return fe_add(L, op, &x, 1, NULL); }

static int binary(lua_State *L, OpKind op, int x, int y) {
  int in[2] = {x, y};
  return fe_add(L, op, in, 2, NULL);
}

/* Pushes tensor id as the single result of a binding. */
static int push_id(lua_State *L, int id) {
  fe_push(L, id);
  return 1;
}

/* ---- elementwise ---- */

/* x cast to f32 (x itself when it is f32 already). */
static int to_f32(lua_State *L, int x) {
  if (tnode(L, x)->dtype == DT_F32) return x;
  Attrs a = {.to = DT_F32};
  return fe_add(L, OP_CAST, &x, 1, &a);
}

/* Operand idx of binary op `op` whose other operand is argument other, typed as PyTorch
 * types it: a Lua integer (in int32 range) beside an i32 tensor is an i32 constant, any
 * other number an f32 one. */
static int typed_operand(lua_State *L, int idx, int other, OpKind op) {
  if (lua_type(L, idx) == LUA_TNUMBER && lua_isinteger(L, idx) && fe_is_tensor(L, other) &&
      tnode(L, fe_tensor(L, other, kiln_ops[op].name))->dtype == DT_I32 && kiln_ops[op].iexpr) {
    lua_Integer v = lua_tointeger(L, idx);
    if (v >= INT32_MIN && v <= INT32_MAX) return fe_const_i32(L, (int32_t)v);
  }
  return fe_operand(L, idx, kiln_ops[op].name);
}

/* add sub mul div pow max min eq ne lt le gt ge (a, b); also the operators. PyTorch's type
 * promotion: i32 with i32 stays i32 where the op has an i32 form (wrapping); i32 with f32,
 * and i32 under div or pow (true division), compute in f32. */
static int l_binary(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  int x = typed_operand(L, 1, 2, op);
  int y = typed_operand(L, 2, 1, op);
  DType tx = tnode(L, x)->dtype, ty = tnode(L, y)->dtype;
  if ((tx == DT_I32 || ty == DT_I32) && (tx != ty || !kiln_ops[op].iexpr) && tx != DT_BOOL && ty != DT_BOOL) {
    x = to_f32(L, x);
    y = to_f32(L, y);
  }
  return push_id(L, binary(L, op, x, y));
}

/* neg abs exp log sqrt rsqrt tanh sigmoid relu silu (x); an i32 x stays i32 for neg and
 * abs (wrapping) and is promoted to f32 for the others, as PyTorch does. */
static int l_unary(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  int x = fe_tensor(L, 1, kiln_ops[op].name);
  if (tnode(L, x)->dtype == DT_I32 && !kiln_ops[op].iexpr) x = to_f32(L, x);
  return push_id(L, unary(L, op, x));
}

/* gelu(x [, {approximate = "none" | "tanh"}]), also gelu(x, "tanh") */
static int l_gelu(lua_State *L) {
  int x = fe_tensor(L, 1, "gelu");
  const char *approx = "none";
  if (lua_type(L, 2) == LUA_TSTRING) {
    approx = lua_tostring(L, 2);
  } else {
    static const char *const known[] = {"approximate", NULL};
    int o = opts_arg(L, 2, "gelu", known);
    if (opt(L, o, "approximate") == LUA_TSTRING) approx = lua_tostring(L, -1);
    else if (!lua_isnil(L, -1)) fe_error(L, "gelu: approximate must be \"none\" or \"tanh\"");
  }
  if (strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0)
    return fe_error(L, "gelu: approximate must be \"none\" or \"tanh\", got \"%s\"", approx);
  return push_id(L, unary(L, strcmp(approx, "tanh") == 0 ? OP_GELU_TANH : OP_GELU, x));
}

/* where(cond, a, b): a and b may be numbers. */
static int l_where(lua_State *L) {
  int in[3];
  in[0] = fe_tensor(L, 1, "where");
  in[1] = fe_operand(L, 2, "where");
  in[2] = fe_operand(L, 3, "where");
  return push_id(L, fe_add(L, OP_WHERE, in, 3, NULL));
}

/* cast(x, dtype) */
static int l_cast(lua_State *L) {
  int x = fe_tensor(L, 1, "cast");
  DType t = DT_F32;
  const char *s = lua_tostring(L, 2);
  if (lua_type(L, 2) != LUA_TSTRING || !dtype_parse(s, &t))
    return fe_error(L, "cast: dtype must be \"f32\", \"i32\" or \"bool\", got %s", s ? s : luaL_typename(L, 2));
  if (tnode(L, x)->dtype == t) return push_id(L, x);
  Attrs a = {.to = t};
  return push_id(L, fe_add(L, OP_CAST, &x, 1, &a));
}

/* ---- matmul and linear ---- */

/* x @ y as torch.matmul: a rank-1 x is [1, k] and a rank-1 y is [k, 1] for the
 * product, and those dims are dropped from the result. Transposes apply to
 * operands of rank >= 2 only (a vector is its own transpose). */
static int matmul_ids(lua_State *L, int x, int y, bool tx, bool ty) {
  const Shape *sx = tshape(L, x), *sy = tshape(L, y);
  if (sx->rank == 0 || sy->rank == 0)
    return fe_error(L, "matmul: operands need rank >= 1: %s @ %s", shape_str(sx), shape_str(sy));
  bool vx = sx->rank == 1, vy = sy->rank == 1;
  if (vx) {
    Shape s = {2, {1, sx->dim[0]}};
    x = reshape_to(L, x, &s);
    tx = false;
  }
  if (vy) {
    Shape s = {2, {sy->dim[0], 1}};
    y = reshape_to(L, y, &s);
    ty = false;
  }
  Attrs a = {.trans_x = tx, .trans_y = ty};
  int in[2] = {x, y};
  int r = fe_add(L, OP_MATMUL, in, 2, &a);
  if (!vx && !vy) return r;
  Shape out = *tshape(L, r), back = {0};
  for (int i = 0; i < out.rank; i++) {
    if (vx && i == out.rank - 2) continue;
    if (vy && i == out.rank - 1) continue;
    back.dim[back.rank++] = out.dim[i];
  }
  return reshape_to(L, r, &back);
}

/* matmul(a, b [, {trans_a = bool, trans_b = bool}]) */
static int l_matmul(lua_State *L) {
  static const char *const known[] = {"trans_a", "trans_b", NULL};
  int x = fe_tensor(L, 1, "matmul");
  int y = fe_tensor(L, 2, "matmul");
  int o = opts_arg(L, 3, "matmul", known);
  return push_id(L, matmul_ids(L, x, y, opt_bool(L, o, "trans_a", false), opt_bool(L, o, "trans_b", false)));
}

/* linear(x, w [, b]): x @ w^T + b with PyTorch's [out, in] weight. */
static int l_linear(lua_State *L) {
  int x = fe_tensor(L, 1, "linear");
  int w = fe_tensor(L, 2, "linear");
  const Shape *sx = tshape(L, x), *sw = tshape(L, w);
  if (sw->rank != 2) return fe_error(L, "linear: weight must be [out, in], got %s", shape_str(sw));
  if (sx->rank == 0 || sx->dim[sx->rank - 1] != sw->dim[1])
    return fe_error(L, "linear: input %s has %lld features, weight %s expects %lld", shape_str(sx),
                    (long long)(sx->rank ? sx->dim[sx->rank - 1] : 0), shape_str(sw), (long long)sw->dim[1]);
  int y = matmul_ids(L, x, w, false, true);
  if (lua_isnoneornil(L, 3)) return push_id(L, y);
  int b = fe_tensor(L, 3, "linear");
  const Shape *sb = tshape(L, b);
  if (sb->rank != 1 || sb->dim[0] != sw->dim[0])
    return fe_error(L, "linear: bias must be [%lld] for weight %s, got %s", (long long)sw->dim[0], shape_str(sw), shape_str(sb));
  return push_id(L, binary(L, OP_ADD, y, b));
}

/* ---- convolution and pooling ---- */

/* The tensors of conv2d / conv_transpose2d(x, w [, bias] [, opts]) into in; returns how
 * many (2 or 3). The options sit after them, or at 4 after a nil bias. */
static int conv_operands(lua_State *L, const char *op, int in[3]) {
  in[0] = fe_tensor(L, 1, op);
  in[1] = fe_tensor(L, 2, op);
  if (!fe_is_tensor(L, 3)) return 2;
  in[2] = fe_tensor(L, 3, op);
  return 3;
}

/* conv_transpose2d(x, w [, bias] [, {stride, padding, output_padding, dilation, groups}])
 * as torch's: w [C, O/groups, KH, KW]; padding a number, {h, w} or {top, left, bottom,
 * right}; output_padding (a number or {h, w}) adds rows at the bottom/right, stored as
 * less bottom/right padding (the shape rule bounds it by stride or dilation). */
static int l_conv_transpose2d(lua_State *L) {
  static const char *const known[] = {"stride", "padding", "output_padding", "dilation", "groups", NULL};
  int in[3], nin = conv_operands(L, "conv_transpose2d", in);
  int o = opts_arg(L, nin + 1 + (nin == 2 && lua_isnil(L, 3) && !lua_isnone(L, 4)), "conv_transpose2d", known);
  Attrs a = {0};
  int outpad[2];
  opt_ints(L, o, "stride", 1, a.stride, 2, "conv_transpose2d");
  opt_ints(L, o, "dilation", 1, a.dilation, 2, "conv_transpose2d");
  opt_ints(L, o, "padding", 0, a.pad, 4, "conv_transpose2d");
  opt_ints(L, o, "output_padding", 0, outpad, 2, "conv_transpose2d");
  if (outpad[0] < 0 || outpad[1] < 0)
    return fe_error(L, "conv_transpose2d: output_padding [%d, %d] must be >= 0", outpad[0], outpad[1]);
  a.pad[2] -= outpad[0], a.pad[3] -= outpad[1];
  int64_t groups = opt_int(L, o, "groups", 1, "conv_transpose2d");
  if (groups < 1 || groups > (1 << 20)) return fe_error(L, "conv_transpose2d: groups %lld must be >= 1", (long long)groups);
  a.groups = (int)groups;
  return push_id(L, fe_add(L, OP_CONV_TRANSPOSE2D, in, nin, &a));
}

/* conv2d(x, w [, bias] [, {stride, padding, dilation, groups}]) */
static int l_conv2d(lua_State *L) {
  static const char *const known[] = {"stride", "padding", "dilation", "groups", NULL};
  int in[3], nin = conv_operands(L, "conv2d", in);
  int o = opts_arg(L, nin + 1 + (nin == 2 && lua_isnil(L, 3) && !lua_isnone(L, 4)), "conv2d", known);
  Attrs a = {0};
  opt_ints(L, o, "stride", 1, a.stride, 2, "conv2d");
  opt_ints(L, o, "dilation", 1, a.dilation, 2, "conv2d");
  int64_t groups = opt_int(L, o, "groups", 1, "conv2d");
  if (groups < 1 || groups > (1 << 20)) return fe_error(L, "conv2d: groups %lld must be >= 1", (long long)groups);
  a.groups = (int)groups;
  if (opt(L, o, "padding") == LUA_TSTRING) {
    const char *p = lua_tostring(L, -1);
    const Shape *sw = tshape(L, in[1]);
    if (strcmp(p, "same") == 0) {
      if (sw->rank != 4) fe_error(L, "conv2d: weight must be [O, C/groups, KH, KW], got %s", shape_str(sw));
      if (a.stride[0] != 1 || a.stride[1] != 1) fe_error(L, "conv2d: padding \"same\" needs stride 1");
      for (int i = 0; i < 2; i++) {
        int total = a.dilation[i] * (int)(sw->dim[2 + i] - 1);
        a.pad[i] = total / 2;          /* PyTorch puts the odd pixel at the bottom/right */
        a.pad[i + 2] = total - total / 2;
      }
    } else if (strcmp(p, "valid") != 0) {
      fe_error(L, "conv2d: padding must be a number, {h, w}, {top, left, bottom, right}, \"same\" or \"valid\", got \"%s\"", p);
    }
    lua_pop(L, 1);
  } else {
    lua_pop(L, 1);
    opt_ints(L, o, "padding", 0, a.pad, 4, "conv2d");
  }
  return push_id(L, fe_add(L, OP_CONV2D, in, nin, &a));
}

/* maxpool2d(x, {kernel, stride, padding}) / avgpool2d(x, {..., count_include_pad = true});
 * the options may also be just the kernel size. stride defaults to the kernel. */
static int l_pool(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = kiln_ops[op].name;
  static const char *const known[] = {"kernel", "kernel_size", "stride", "padding", "count_include_pad", "ceil_mode", NULL};
  int x = fe_tensor(L, 1, name);
  Attrs a = {0};
  if (lua_type(L, 2) == LUA_TNUMBER) {
    lua_pushvalue(L, 2);
    int_list(L, name, "kernel", a.kernel, 2);
    lua_pop(L, 1);
    a.stride[0] = a.kernel[0], a.stride[1] = a.kernel[1];
    a.count_pad = op == OP_AVGPOOL2D;
    return push_id(L, fe_add(L, op, &x, 1, &a));
  }
  int o = opts_arg(L, 2, name, known);
  const char *kkey = opt(L, o, "kernel") != LUA_TNIL ? "kernel" : "kernel_size";
  lua_pop(L, 1);
  if (opt(L, o, kkey) == LUA_TNIL) fe_error(L, "%s: needs a kernel size: %s(x, {kernel = 2})", name, name);
  lua_pop(L, 1);
  opt_ints(L, o, kkey, 0, a.kernel, 2, name);
  opt_ints(L, o, "stride", 0, a.stride, 2, name);
  if (opt(L, o, "stride") == LUA_TNIL) a.stride[0] = a.kernel[0], a.stride[1] = a.kernel[1];
  lua_pop(L, 1);
  opt_ints(L, o, "padding", 0, a.pad, 4, name);
  if (opt_bool(L, o, "ceil_mode", false)) fe_error(L, "%s: ceil_mode is not supported", name);
  if (op == OP_AVGPOOL2D) a.count_pad = opt_bool(L, o, "count_include_pad", true);
  else if (opt(L, o, "count_include_pad") != LUA_TNIL) fe_error(L, "maxpool2d: count_include_pad is an avgpool2d option");
  return push_id(L, fe_add(L, op, &x, 1, &a));
}

/* ---- reductions and normalisations ---- */

/* Bitmask of the dims argument at idx (nil: all; a number; an array) for rank. */
static uint32_t dims_mask(lua_State *L, int idx, int rank, const char *op) {
  if (lua_isnoneornil(L, idx)) return rank ? (1u << rank) - 1 : 0;
  uint32_t m = 0;
  if (lua_type(L, idx) == LUA_TNUMBER) return 1u << fe_dim(L, fe_int_arg(L, idx, op, "dim"), rank, op);
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx)) fe_error(L, "%s: dims must be a number or an array, got %s", op, luaL_typename(L, idx));
  lua_Integer n = luaL_len(L, idx);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    int d = fe_dim(L, fe_int_arg(L, -1, op, "dim"), rank, op);
    lua_pop(L, 1);
    if (m & (1u << d)) fe_error(L, "%s: dim %d appears twice", op, d);
    m |= 1u << d;
  }
  return m;
}

/* sum mean amax amin prod (x [, dims [, keepdim]]) */
static int l_reduce(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = lua_tostring(L, lua_upvalueindex(2));
  int x = fe_tensor(L, 1, name);
  Attrs a = {.axes = dims_mask(L, 2, tshape(L, x)->rank, name), .keepdims = lua_toboolean(L, 3)};
  return push_id(L, fe_add(L, op, &x, 1, &a));
}

/* argmax / argmin (x [, dim [, keepdim]]) -> i32, torch's: without dim, the index into
 * the flattened x (keepdim then ignored). f32 x of rank >= 1 (the shape rule says so). */
static int l_argreduce(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = kiln_ops[op].name;
  int x = fe_tensor(L, 1, name);
  Attrs a = {.keepdims = lua_toboolean(L, 3)};
  if (lua_isnoneornil(L, 2)) {
    Shape flat = {1, {shape_numel(tshape(L, x))}};
    x = reshape_to(L, x, &flat);
    a.keepdims = false;
  } else {
    a.axis = fe_dim(L, fe_int_arg(L, 2, name, "dim"), tshape(L, x)->rank, name);
  }
  return push_id(L, fe_add(L, op, &x, 1, &a));
}

/* softmax(x [, dim = -1]) */
static int l_softmax(lua_State *L) {
  int x = fe_tensor(L, 1, "softmax");
  int64_t d = lua_isnoneornil(L, 2) ? -1 : fe_int_arg(L, 2, "softmax", "dim");
  Attrs a = {.axis = fe_dim(L, d, tshape(L, x)->rank, "softmax")};
  return push_id(L, fe_add(L, OP_SOFTMAX, &x, 1, &a));
}

/* An f32 CONST filled with v, shaped s. */
static int filled(lua_State *L, const Shape *s, float v) {
  int64_t n = shape_numel(s);
  float *buf = kiln_alloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) buf[i] = v;
  return fe_const_f32(L, buf, s);
}

/* Optional tensor argument: its id, or -1 when nil/absent. */
static int opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? -1 : fe_tensor(L, idx, op);
}

/* layernorm(x, gamma, beta [, {eps = 1e-5, dims = 1}]) / rmsnorm(x, gamma [, {eps, dims}]);
 * gamma/beta may be nil or left out before the options table. */
static int l_norm(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = kiln_ops[op].name;
  static const char *const known[] = {"eps", "dims", NULL};
  bool ln = op == OP_LAYERNORM;
  int x = fe_tensor(L, 1, name);
  int oidx = ln ? 4 : 3;                 /* the options may also come early: rmsnorm(x, {eps = 1e-6}) */
  for (int i = 2; i < oidx; i++)
    if (lua_istable(L, i) && !fe_is_tensor(L, i)) oidx = i;
  int gamma = oidx > 2 ? opt_tensor(L, 2, name) : -1;
  int beta = ln && oidx > 3 ? opt_tensor(L, 3, name) : -1;
  int o = opts_arg(L, oidx, name, known);
  int rank = tshape(L, x)->rank;
  int64_t dims = opt_int(L, o, "dims", 1, name);
  if (dims < 1 || dims > rank) return fe_error(L, "%s: dims %lld must be 1..%d for %s", name, (long long)dims, rank, shape_str(tshape(L, x)));
  Attrs a = {.axis = rank - (int)dims, .eps = (float)opt_number(L, o, "eps", 1e-5, name)};
  int in[3] = {x, gamma, beta}, nin = beta >= 0 ? 3 : gamma >= 0 ? 2 : 1;
  if (beta >= 0 && gamma < 0) {
    Shape tail = {.rank = (int)dims};
    for (int i = 0; i < tail.rank; i++) tail.dim[i] = tshape(L, x)->dim[a.axis + i];
    in[1] = filled(L, &tail, 1.0f);
  }
  return push_id(L, fe_add(L, op, in, nin, &a));
}

/* batchnorm(x, mean, var, gamma, beta [, {eps = 1e-5}]); gamma/beta may be nil. */
static int l_batchnorm(lua_State *L) {
  static const char *const known[] = {"eps", NULL};
  int in[5];
  in[0] = fe_tensor(L, 1, "batchnorm");
  in[1] = fe_tensor(L, 2, "batchnorm");
  in[2] = fe_tensor(L, 3, "batchnorm");
  in[3] = opt_tensor(L, 4, "batchnorm");
  in[4] = opt_tensor(L, 5, "batchnorm");
  int o = opts_arg(L, 6, "batchnorm", known);
  const Shape *sx = tshape(L, in[0]);
  if (sx->rank < 2) return fe_error(L, "batchnorm: x needs rank >= 2 (channels on dim 1), got %s", shape_str(sx));
  Shape c = {1, {sx->dim[1]}};
  if (in[3] < 0) in[3] = filled(L, &c, 1.0f);
  if (in[4] < 0) in[4] = filled(L, &c, 0.0f);
  Attrs a = {.eps = (float)opt_number(L, o, "eps", 1e-5, "batchnorm")};
  return push_id(L, fe_add(L, OP_BATCHNORM, in, 5, &a));
}

/* ---- data movement ---- */

/* A shape from arguments idx.. : one array, or the numbers themselves. -1 allowed once. */
static Shape shape_list(lua_State *L, int idx, const char *op, int *minus) {
  Shape s = {0};
  bool table = lua_istable(L, idx) && !fe_is_tensor(L, idx);
  int n = table ? (int)luaL_len(L, idx) : lua_gettop(L) - idx + 1;
  if (n > KILN_MAX_RANK) fe_error(L, "%s: rank %d exceeds Kiln's limit of %d", op, n, KILN_MAX_RANK);
  *minus = -1;
  for (int i = 0; i < n; i++) {
    if (table) lua_geti(L, idx, i + 1);
    else lua_pushvalue(L, idx + i);
    int64_t d = fe_int_arg(L, -1, op, "shape entry");
    lua_pop(L, 1);
    if (d == -1 && *minus >= 0) fe_error(L, "%s: only one shape entry may be -1", op);
    if (d == -1) *minus = i;
    else if (d < 1) fe_error(L, "%s: shape entry %lld is invalid (dims are >= 1; one may be -1)", op, (long long)d);
    s.dim[s.rank++] = d;
  }
  return s;
}

/* reshape(x, shape) or reshape(x, d0, d1, ...); one entry may be -1. */
static int l_reshape(lua_State *L) {
  int x = fe_tensor(L, 1, "reshape");
  int minus;
  Shape s = shape_list(L, 2, "reshape", &minus);
  const Shape *sx = tshape(L, x);
  int64_t numel = shape_numel(sx);
  if (minus >= 0) {
    int64_t known = 1;
    for (int i = 0; i < s.rank; i++)
      if (i != minus) known = s.dim[i] > numel || known > numel ? numel + 1 : known * s.dim[i];   /* both <= 2^31 */
    if (known > numel || numel % known != 0)
      return fe_error(L, "reshape: cannot reshape %s (%lld elements) into %s", shape_str(sx), (long long)numel, shape_str(&s));
    s.dim[minus] = numel / known;
  }
  if (shape_numel_checked(&s) != numel)
    return fe_error(L, "reshape: cannot reshape %s (%lld elements) into %s", shape_str(sx), (long long)numel, shape_str(&s));
  return push_id(L, reshape_to(L, x, &s));
}

/* A TRANSPOSE by perm (already a permutation of normalised dims), or x for the identity. */
static int permute_ids(lua_State *L, int x, const int *perm) {
  int rank = tshape(L, x)->rank;
  bool identity = true;
  for (int i = 0; i < rank; i++) identity &= perm[i] == i;
  if (identity) return x;
  Attrs a = {0};
  memcpy(a.perm, perm, sizeof(int) * (size_t)rank);
  return fe_add(L, OP_TRANSPOSE, &x, 1, &a);
}

/* transpose(x, d0, d1): swaps two dims. */
static int l_transpose(lua_State *L) {
  int x = fe_tensor(L, 1, "transpose");
  int rank = tshape(L, x)->rank;
  int d0 = fe_dim(L, fe_int_arg(L, 2, "transpose", "dim0"), rank, "transpose");
  int d1 = fe_dim(L, fe_int_arg(L, 3, "transpose", "dim1"), rank, "transpose");
  int perm[KILN_MAX_RANK];
  for (int i = 0; i < KILN_MAX_RANK; i++) perm[i] = i;
  perm[d0] = d1, perm[d1] = d0;
  return push_id(L, permute_ids(L, x, perm));
}

/* permute(x, {p0, p1, ...}) or permute(x, p0, p1, ...) */
static int l_permute(lua_State *L) {
  int x = fe_tensor(L, 1, "permute");
  int rank = tshape(L, x)->rank;
  bool table = lua_istable(L, 2);
  int n = table ? (int)luaL_len(L, 2) : lua_gettop(L) - 1;
  if (n != rank) return fe_error(L, "permute: %d dims given for a rank-%d tensor %s", n, rank, shape_str(tshape(L, x)));
  int perm[KILN_MAX_RANK] = {0};
  bool seen[KILN_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    if (table) lua_geti(L, 2, i + 1);
    else lua_pushvalue(L, 2 + i);
    perm[i] = fe_dim(L, fe_int_arg(L, -1, "permute", "dim"), rank, "permute");
    lua_pop(L, 1);
    if (seen[perm[i]]) return fe_error(L, "permute: dim %d appears twice", perm[i]);
    seen[perm[i]] = true;
  }
  return push_id(L, permute_ids(L, x, perm));
}

/* flatten(x [, start_dim = 1 [, end_dim = -1]]) */
static int l_flatten(lua_State *L) {
  int x = fe_tensor(L, 1, "flatten");
  const Shape *sx = tshape(L, x);
  if (sx->rank == 0) {
    Shape one = {1, {1}};
    return push_id(L, reshape_to(L, x, &one));
  }
  int start = fe_dim(L, lua_isnoneornil(L, 2) ? 1 : fe_int_arg(L, 2, "flatten", "start_dim"), sx->rank, "flatten");
  int end = fe_dim(L, lua_isnoneornil(L, 3) ? -1 : fe_int_arg(L, 3, "flatten", "end_dim"), sx->rank, "flatten");
  if (sx->rank == 1) return push_id(L, x);
  if (start > end) return fe_error(L, "flatten: start_dim %d comes after end_dim %d", start, end);
  Shape s = {0};
  for (int i = 0; i < sx->rank; i++) {
    if (i > start && i <= end) s.dim[s.rank - 1] *= sx->dim[i];
    else s.dim[s.rank++] = sx->dim[i];
  }
  return push_id(L, reshape_to(L, x, &s));
}

/* unsqueeze(x, dim): a new size-1 dim at dim (-1 appends). */
static int l_unsqueeze(lua_State *L) {
  int x = fe_tensor(L, 1, "unsqueeze");
  const Shape *sx = tshape(L, x);
  if (sx->rank == KILN_MAX_RANK) return fe_error(L, "unsqueeze: %s already has Kiln's maximum rank %d", shape_str(sx), KILN_MAX_RANK);
  int d = fe_dim(L, fe_int_arg(L, 2, "unsqueeze", "dim"), sx->rank + 1, "unsqueeze");
  Shape s = {0};
  for (int i = 0; i <= sx->rank; i++) {
    if (i == d) s.dim[s.rank++] = 1;
    if (i < sx->rank) s.dim[s.rank++] = sx->dim[i];
  }
  return push_id(L, reshape_to(L, x, &s));
}

/* squeeze(x [, dim]): drops size-1 dims (all of them, or dim if it is size 1). */
static int l_squeeze(lua_State *L) {
  int x = fe_tensor(L, 1, "squeeze");
  const Shape *sx = tshape(L, x);
  int only = lua_isnoneornil(L, 2) ? -1 : fe_dim(L, fe_int_arg(L, 2, "squeeze", "dim"), sx->rank, "squeeze");
  Shape s = {0};
  for (int i = 0; i < sx->rank; i++)
    if (!(sx->dim[i] == 1 && (only < 0 || only == i))) s.dim[s.rank++] = sx->dim[i];
  return push_id(L, reshape_to(L, x, &s));
}

/* Reads an array of tensors at idx into ids; returns the count. */
static int tensor_list(lua_State *L, int idx, const char *op, int **ids) {
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx)) fe_error(L, "%s: argument 1 must be an array of tensors, got %s", op, luaL_typename(L, idx));
  int n = (int)luaL_len(L, idx);
  if (n < 1) fe_error(L, "%s: the array of tensors is empty", op);
  *ids = kiln_alloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    if (!fe_is_tensor(L, -1)) fe_error(L, "%s: entry %d of the array is a %s, not a tensor", op, i + 1, luaL_typename(L, -1));
    (*ids)[i] = fe_tensor(L, -1, op);
    lua_pop(L, 1);
  }
  return n;
}

/* The most inputs one CONCAT node takes. A kernel binds each input as a buffer, and
 * Metal's argument table holds 31 (the output, and the operands an epilogue fused into
 * the kernel may add, need the rest); C has no limit but gains nothing from one huge
 * node either. A wider concat is a tree of these, the same values in the same order. */
enum { CONCAT_MAX_IN = 16 };

/* A CONCAT of ids[0..n) (n >= 2) along axis: one node, or CONCAT_MAX_IN-wide groups
 * concatenated again (recursively) when n is larger. */
static int concat_ids(lua_State *L, int *ids, int n, int axis) {
  Attrs a = {.axis = axis};
  if (n <= CONCAT_MAX_IN) return fe_add(L, OP_CONCAT, ids, n, &a);
  int ng = (n + CONCAT_MAX_IN - 1) / CONCAT_MAX_IN;
  int *groups = kiln_alloc(sizeof(int) * (size_t)ng);
  for (int g = 0; g < ng; g++) {
    int at = g * CONCAT_MAX_IN, k = n - at < CONCAT_MAX_IN ? n - at : CONCAT_MAX_IN;
    groups[g] = k == 1 ? ids[at] : fe_add(L, OP_CONCAT, ids + at, k, &a);
  }
  return concat_ids(L, groups, ng, axis);
}

/* concat(list [, dim = 0]) */
static int l_concat(lua_State *L) {
  int *ids;
  int n = tensor_list(L, 1, "concat", &ids);
  int64_t d = lua_isnoneornil(L, 2) ? 0 : fe_int_arg(L, 2, "concat", "dim");
  if (n == 1) return push_id(L, ids[0]);
  return push_id(L, concat_ids(L, ids, n, fe_dim(L, d, tshape(L, ids[0])->rank, "concat")));
}

/* stack(list [, dim = 0]): unsqueeze every tensor at dim, then concat. */
static int l_stack(lua_State *L) {
  int *ids;
  int n = tensor_list(L, 1, "stack", &ids);
  int rank = tshape(L, ids[0])->rank;
  if (rank == KILN_MAX_RANK) return fe_error(L, "stack: the result would exceed rank %d", KILN_MAX_RANK);
  int d = fe_dim(L, lua_isnoneornil(L, 2) ? 0 : fe_int_arg(L, 2, "stack", "dim"), rank + 1, "stack");
  for (int i = 0; i < n; i++) {
    const Shape *si = tshape(L, ids[i]);
    Shape s = {0};
    for (int k = 0; k <= si->rank; k++) {
      if (k == d) s.dim[s.rank++] = 1;
      if (k < si->rank) s.dim[s.rank++] = si->dim[k];
    }
    ids[i] = reshape_to(L, ids[i], &s);
  }
  if (n == 1) return push_id(L, ids[0]);
  return push_id(L, concat_ids(L, ids, n, d));
}

/* Python's slice bound: nil -> def, negative counts from the end, clamped to [0, size]. */
static int64_t slice_bound(lua_State *L, int idx, int64_t size, int64_t def, const char *what) {
  if (lua_isnoneornil(L, idx)) return def;
  int64_t v = fe_int_arg(L, idx, "slice", what);
  if (v < 0) v += size;
  return v < 0 ? 0 : v > size ? size : v;
}

/* The slice node of x along dim d (attrs normalised), or x itself for a full range. */
static int slice_ids(lua_State *L, int x, int d, int64_t start, int64_t stop, int64_t step) {
  const Shape *sx = tshape(L, x);
  if (stop < start) stop = start;
  if (start == 0 && stop == sx->dim[d] && step == 1) return x;
  Attrs a = {0};
  for (int i = 0; i < sx->rank; i++) a.start[i] = 0, a.end[i] = sx->dim[i], a.step[i] = 1;
  a.start[d] = start, a.end[d] = stop, a.step[d] = step;
  return fe_add(L, OP_SLICE, &x, 1, &a);
}

/* slice(x, dim, start, stop [, step = 1]): x[start:stop:step] along dim. */
static int l_slice(lua_State *L) {
  int x = fe_tensor(L, 1, "slice");
  const Shape *sx = tshape(L, x);
  if (sx->rank == 0) return fe_error(L, "slice: cannot slice a scalar");
  int d = fe_dim(L, fe_int_arg(L, 2, "slice", "dim"), sx->rank, "slice");
  int64_t step = lua_isnoneornil(L, 5) ? 1 : fe_int_arg(L, 5, "slice", "step");
  if (step < 1) return fe_error(L, "slice: step %lld must be positive", (long long)step);
  int64_t size = sx->dim[d];
  int64_t start = slice_bound(L, 3, size, 0, "start"), stop = slice_bound(L, 4, size, size, "stop");
  if (step > size) step = size;          /* the same single element; keeps index arithmetic small */
  return push_id(L, slice_ids(L, x, d, start, stop, step));
}

/* chunk(x, n [, dim = 0]) -> up to n tensors, as torch.chunk (the last may be smaller). */
static int l_chunk(lua_State *L) {
  int x = fe_tensor(L, 1, "chunk");
  const Shape *sx = tshape(L, x);
  int64_t n = fe_int_arg(L, 2, "chunk", "the number of chunks");
  if (n < 1) return fe_error(L, "chunk: the number of chunks %lld must be >= 1", (long long)n);
  if (sx->rank == 0) return fe_error(L, "chunk: cannot split a scalar");
  int d = fe_dim(L, lua_isnoneornil(L, 3) ? 0 : fe_int_arg(L, 3, "chunk", "dim"), sx->rank, "chunk");
  int64_t size = sx->dim[d], step = size / n + (size % n != 0);   /* ceil(size / n), no overflow */
  int count = 0;
  for (int64_t s = 0; s < size; s += step) {
    luaL_checkstack(L, 1, "chunk: too many chunks");
    fe_push(L, slice_ids(L, x, d, s, s + step < size ? s + step : size, 1));
    count++;
  }
  return count;
}

/* Constant indices in[1] into dim axis of in[0] are checked here, at the script's line,
 * since the interpreter would refuse them only at run time and the kernels clamp or skip
 * them silently: one out of range is an error naming op. */
static void check_const_indices(lua_State *L, const int *in, int axis, const char *op) {
  const Node *ix = tnode(L, in[1]);
  int64_t n = tshape(L, in[0])->dim[axis];
  if (ix->op == OP_CONST && ix->data)
    for (int64_t i = 0; i < shape_numel(&ix->shape); i++) {
      int32_t v = ((const int32_t *)ix->data)[i];
      if (v < 0 || v >= n)
        fe_error(L, "%s: constant index %d (entry %lld) is out of range for dim %d of %s (0..%lld)", op, (int)v,
                 (long long)i, axis, shape_str(tshape(L, in[0])), (long long)(n - 1));
    }
}

/* A GATHER node, its constant indices checked (check_const_indices). */
static int gather_ids(lua_State *L, const int *in, int axis, const char *op) {
  int id = fe_add(L, OP_GATHER, in, 2, &(Attrs){.axis = axis});
  check_const_indices(L, in, axis, op);
  return id;
}

/* gather(x, indices, dim): numpy.take / torch.index_select with any-rank i32 indices. */
static int l_gather(lua_State *L) {
  int in[2];
  in[0] = fe_tensor(L, 1, "gather");
  in[1] = fe_tensor(L, 2, "gather");
  int64_t d = lua_isnoneornil(L, 3) ? 0 : fe_int_arg(L, 3, "gather", "dim");
  return push_id(L, gather_ids(L, in, fe_dim(L, d, tshape(L, in[0])->rank, "gather"), "gather"));
}

/* gather_elements(x, idx [, dim = 0]) (torch.gather without broadcasting; take_along_dim
 * in ops.lua broadcasts first): idx i32 of x's rank, dims equal but along dim. A constant
 * index out of range is an error here (kernels would clamp it). */
static int l_gather_elements(lua_State *L) {
  int in[2];
  in[0] = fe_tensor(L, 1, "gather_elements");
  in[1] = fe_tensor(L, 2, "gather_elements");
  int64_t d = lua_isnoneornil(L, 3) ? 0 : fe_int_arg(L, 3, "gather_elements", "dim");
  int axis = fe_dim(L, d, tshape(L, in[0])->rank, "gather_elements");
  int id = fe_add(L, OP_GATHER_ELEMENTS, in, 2, &(Attrs){.axis = axis});
  check_const_indices(L, in, axis, "gather_elements");
  return push_id(L, id);
}

/* scatter(x, dim, index, src) / index_copy(x, dim, index, source), torch's argument
 * order: src a tensor of index's shape (scatter; ops.lua wraps this for numbers and
 * larger sources) or of x's shape with index's length along dim (index_copy). A
 * constant index out of range is an error here (kernels would skip it). */
static int l_scatter(lua_State *L) {
  OpKind op = (OpKind)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = kiln_ops[op].name;
  int in[3];
  in[0] = fe_tensor(L, 1, name);
  int64_t d = fe_int_arg(L, 2, name, "dim");
  in[1] = fe_tensor(L, 3, name);
  in[2] = fe_tensor(L, 4, name);
  int axis = fe_dim(L, d, tshape(L, in[0])->rank, name);
  int id = fe_add(L, op, in, 3, &(Attrs){.axis = axis});
  check_const_indices(L, in, axis, name);
  return push_id(L, id);
}

/* Pushes the values and the i32 indices of the k first elements of x along dim in
 * topk's order (largest or smallest first): a TOPK node (the indices) and a
 * GATHER_ELEMENTS of x by them (the values, exact copies). Two nodes because a node
 * has one result: the values are a gather of the indices, so nothing is sorted twice. */
static int push_topk(lua_State *L, int x, int64_t k, int64_t dim, bool largest, const char *op) {
  const Shape *s = tshape(L, x);
  if (s->rank == 0) return fe_error(L, "%s: x must have rank >= 1, got a scalar", op);
  int axis = fe_dim(L, dim, s->rank, op);
  if (k < 1 || k > s->dim[axis])
    return fe_error(L, "%s: k = %lld is not in [1, %lld] for %s along dim %d", op, (long long)k, (long long)s->dim[axis],
                    shape_str(s), axis);
  int idx = fe_add(L, OP_TOPK, &x, 1, &(Attrs){.axis = axis, .k = (int)k, .largest = largest});
  int in[2] = {x, idx};
  int vals = fe_add(L, OP_GATHER_ELEMENTS, in, 2, &(Attrs){.axis = axis});
  fe_push(L, vals);
  fe_push(L, idx);
  return 2;
}

/* topk(x, k [, dim = -1 [, largest = true [, sorted = true]]]) -> values, indices (i32).
 * Always sorted (torch leaves the order open when sorted is false); equal values by
 * index; a NaN counts as larger than every number. */
static int l_topk(lua_State *L) {
  int x = fe_tensor(L, 1, "topk");
  int64_t k = fe_int_arg(L, 2, "topk", "k");
  int64_t d = lua_isnoneornil(L, 3) ? -1 : fe_int_arg(L, 3, "topk", "dim");
  bool largest = lua_isnoneornil(L, 4) ? true : lua_toboolean(L, 4);
  return push_topk(L, x, k, d, largest, "topk");
}

/* sort(x [, dim = -1 [, descending = false [, stable]]]) -> values, indices (i32): always
 * stable (equal values keep their order), NaN last ascending and first descending. */
static int l_sort(lua_State *L) {
  int x = fe_tensor(L, 1, "sort");
  int64_t d = lua_isnoneornil(L, 2) ? -1 : fe_int_arg(L, 2, "sort", "dim");
  const Shape *s = tshape(L, x);
  int64_t n = s->rank ? s->dim[fe_dim(L, d, s->rank, "sort")] : 1;
  return push_topk(L, x, n, d, lua_toboolean(L, 3), "sort");
}

/* argsort(x [, dim = -1 [, descending = false]]) -> the indices of sort. */
static int l_argsort(lua_State *L) {
  int x = fe_tensor(L, 1, "argsort");
  int64_t d = lua_isnoneornil(L, 2) ? -1 : fe_int_arg(L, 2, "argsort", "dim");
  const Shape *s = tshape(L, x);
  if (s->rank == 0) return fe_error(L, "argsort: x must have rank >= 1, got a scalar");
  int axis = fe_dim(L, d, s->rank, "argsort");
  Attrs a = {.axis = axis, .k = (int)s->dim[axis], .largest = lua_toboolean(L, 3)};
  return push_id(L, fe_add(L, OP_TOPK, &x, 1, &a));
}

/* embedding(table, ids): rows of table [n, d] picked by i32 ids of any shape. */
static int l_embedding(lua_State *L) {
  int in[2];
  in[0] = fe_tensor(L, 1, "embedding");
  in[1] = fe_tensor(L, 2, "embedding");
  if (tshape(L, in[0])->rank != 2) return fe_error(L, "embedding: table must be [n, d], got %s", shape_str(tshape(L, in[0])));
  return push_id(L, gather_ids(L, in, 0, "embedding"));
}

/* ---- attention ---- */

/* An i32 scalar operand of sdpa from option key (a tensor or a Lua integer), def when
 * absent. */
static int scalar_i32_opt(lua_State *L, int o, const char *key, int32_t def) {
  int t = opt(L, o, key);
  int id;
  if (t == LUA_TNIL) id = fe_const_i32(L, def);
  else if (t == LUA_TNUMBER) {
    int64_t v = fe_int_arg(L, -1, "sdpa", key);
    if (v < INT32_MIN || v > INT32_MAX) fe_error(L, "sdpa: %s %lld does not fit i32", key, (long long)v);
    id = fe_const_i32(L, (int32_t)v);
  } else {
    id = fe_tensor(L, -1, "sdpa");
    if (tnode(L, id)->dtype != DT_I32 || tnode(L, id)->shape.rank != 0)
      fe_error(L, "sdpa: %s must be an i32 scalar or an integer, got %s%s", key, dtype_name(tnode(L, id)->dtype),
               shape_str(tshape(L, id)));
  }
  lua_pop(L, 1);
  return id;
}

/* sdpa(q, k, v [, {len = L, pos = P, causal = true, scale = s, window = W}]): fused scaled
 * dot-product attention (docs/lua-api.md); len and pos are i32 scalars (run-time) or
 * integers; window W > 0 makes it a sliding window over a ring of keys (docs/ops.md). */
static int l_sdpa(lua_State *L) {
  static const char *const known[] = {"causal", "len", "pos", "scale", "window", NULL};
  int in[5] = {fe_tensor(L, 1, "sdpa"), fe_tensor(L, 2, "sdpa"), fe_tensor(L, 3, "sdpa")};
  int o = opts_arg(L, 4, "sdpa", known);
  const Shape *q = tshape(L, in[0]), *k = tshape(L, in[1]);
  Attrs a = {.causal = true, .scale = q->rank == 3 ? (float)(1.0 / sqrt((double)q->dim[2])) : 1.0f};
  in[3] = scalar_i32_opt(L, o, "len", k->rank == 3 && k->dim[1] <= INT32_MAX ? (int32_t)k->dim[1] : 0);
  in[4] = scalar_i32_opt(L, o, "pos", 0);
  if (opt(L, o, "causal") != LUA_TNIL) {
    if (!lua_isboolean(L, -1)) fe_error(L, "sdpa: causal must be true or false");
    a.causal = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  if (opt(L, o, "scale") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TNUMBER) fe_error(L, "sdpa: scale must be a number");
    a.scale = (float)lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  if (opt(L, o, "window") != LUA_TNIL) {
    int64_t w = fe_int_arg(L, -1, "sdpa", "window");
    if (w < 1 || w > INT32_MAX) fe_error(L, "sdpa: window must be an integer in [1, 2^31), got %lld", (long long)w);
    if (!a.causal) fe_error(L, "sdpa: window needs causal attention (a window looks back from each row)");
    a.window = (int)w;
  }
  lua_pop(L, 1);
  return push_id(L, fe_add(L, OP_SDPA, in, 5, &a));
}

/* arange(n [, {start = s}]): i32 [n] of s, s + 1, ..., s + n - 1. With a Lua integer s
 * (default 0) a constant; with an i32 scalar tensor s (a run-time position) the constant
 * 0..n-1 plus s, so positions of a chunk at run time are kiln.arange(T, {start = pos}). */
static int l_arange(lua_State *L) {
  static const char *const known[] = {"start", NULL};
  int64_t n = fe_int_arg(L, 1, "arange", "n");
  if (n < 1 || n > KILN_MAX_NUMEL) fe_error(L, "arange: n must be 1..%d, got %lld", KILN_MAX_NUMEL, (long long)n);
  int o = opts_arg(L, 2, "arange", known);
  int64_t base = 0;
  int start = -1;
  int t = opt(L, o, "start");
  if (t == LUA_TNUMBER) base = fe_int_arg(L, -1, "arange", "start");
  else if (t != LUA_TNIL) {
    start = fe_tensor(L, -1, "arange");
    if (tnode(L, start)->dtype != DT_I32 || tnode(L, start)->shape.rank != 0)
      fe_error(L, "arange: start must be an integer or an i32 scalar, got %s%s", dtype_name(tnode(L, start)->dtype),
               shape_str(tshape(L, start)));
  }
  lua_pop(L, 1);
  if (base < INT32_MIN || base + n - 1 > INT32_MAX) fe_error(L, "arange: values past the i32 range");
  int32_t *v = kiln_alloc(sizeof(int32_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = (int32_t)(base + i);
  Shape s = {1, {n}};
  Node *c = graph_leaf(fe_graph(L), OP_CONST, DT_I32, &s, fe_scope_name(L), fe_loc(L));
  c->data = v;
  return push_id(L, start < 0 ? c->id : binary(L, OP_ADD, c->id, start));
}

/* ---- registration ---- */

static const struct { const char *name; OpKind op; } binary_ops[] = {
    {"add", OP_ADD}, {"sub", OP_SUB}, {"mul", OP_MUL}, {"div", OP_DIV}, {"pow", OP_POW},
    {"max", OP_MAX}, {"min", OP_MIN}, {"maximum", OP_MAX}, {"minimum", OP_MIN}, {"fmod", OP_FMOD},
    {"remainder", OP_REMAINDER}, {"eq", OP_EQ}, {"ne", OP_NE}, {"lt", OP_LT}, {"le", OP_LE}, {"gt", OP_GT}, {"ge", OP_GE}};
static const struct { const char *name; OpKind op; } unary_ops[] = {
    {"neg", OP_NEG}, {"abs", OP_ABS}, {"exp", OP_EXP}, {"log", OP_LOG}, {"sqrt", OP_SQRT},
    {"rsqrt", OP_RSQRT}, {"tanh", OP_TANH}, {"sigmoid", OP_SIGMOID}, {"relu", OP_RELU}, {"silu", OP_SILU},
    {"sin", OP_SIN}, {"cos", OP_COS}, {"erf", OP_ERF}, {"floor", OP_FLOOR}, {"ceil", OP_CEIL}, {"round", OP_ROUND},
    {"round_f16", OP_ROUND_F16}};
static const struct { const char *name; OpKind op; } reduce_ops[] = {
    {"sum", OP_REDUCE_SUM}, {"mean", OP_REDUCE_MEAN}, {"amax", OP_REDUCE_MAX}, {"amin", OP_REDUCE_MIN},
    {"prod", OP_REDUCE_PROD}};
static const luaL_Reg plain_ops[] = {
    {"gelu", l_gelu}, {"where", l_where}, {"cast", l_cast}, {"matmul", l_matmul}, {"linear", l_linear},
    {"conv2d", l_conv2d}, {"conv_transpose2d", l_conv_transpose2d}, {"softmax", l_softmax}, {"batchnorm", l_batchnorm}, {"reshape", l_reshape},
    {"transpose", l_transpose}, {"permute", l_permute}, {"flatten", l_flatten}, {"unsqueeze", l_unsqueeze},
    {"squeeze", l_squeeze}, {"concat", l_concat}, {"stack", l_stack}, {"slice", l_slice}, {"chunk", l_chunk},
    {"gather", l_gather}, {"embedding", l_embedding}, {"gather_elements", l_gather_elements}, {"topk", l_topk},
    {"sort", l_sort}, {"argsort", l_argsort}, {"sdpa", l_sdpa}, {"arange", l_arange}, {NULL, NULL}};

/* Functions that are also tensor methods (t:op(...)): every op whose first argument is the tensor. */
static const char *const method_names[] = {
    "add", "sub", "mul", "div", "pow", "max", "min", "maximum", "minimum", "fmod", "remainder", "eq", "ne", "lt", "le", "gt", "ge",
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu", "cast", "matmul",
    "sin", "cos", "erf", "floor", "ceil", "round", "round_f16",
    "sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "softmax", "reshape", "transpose", "permute", "flatten", "unsqueeze", "squeeze",
    "slice", "chunk", "gather", "gather_elements", "topk", "sort", "argsort", "scatter", "index_copy", "layernorm", "rmsnorm", "linear", "conv2d", "conv_transpose2d", "maxpool2d", "avgpool2d", NULL};

/* t[name] = f with the op kind as upvalue 1 (t at the top of the stack). */
static void set_op_closure(lua_State *L, const char *name, lua_CFunction f, OpKind op) {
  lua_pushinteger(L, op);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, -2, name);
}

/* Contract in frontend.h. */
void fe_register_ops(lua_State *L) {
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++) set_op_closure(L, binary_ops[i].name, l_binary, binary_ops[i].op);
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) set_op_closure(L, unary_ops[i].name, l_unary, unary_ops[i].op);
  for (size_t i = 0; i < sizeof reduce_ops / sizeof reduce_ops[0]; i++) {
    lua_pushinteger(L, reduce_ops[i].op);
    lua_pushstring(L, reduce_ops[i].name);
    lua_pushcclosure(L, l_reduce, 2);
    lua_setfield(L, -2, reduce_ops[i].name);
  }
  set_op_closure(L, "maxpool2d", l_pool, OP_MAXPOOL2D);
  set_op_closure(L, "avgpool2d", l_pool, OP_AVGPOOL2D);
  set_op_closure(L, "layernorm", l_norm, OP_LAYERNORM);
  set_op_closure(L, "scatter", l_scatter, OP_SCATTER);
  set_op_closure(L, "index_copy", l_scatter, OP_INDEX_COPY);
  set_op_closure(L, "argmax", l_argreduce, OP_ARGMAX);
  set_op_closure(L, "argmin", l_argreduce, OP_ARGMIN);
  set_op_closure(L, "rmsnorm", l_norm, OP_RMSNORM);
  luaL_setfuncs(L, plain_ops, 0);
}

/* ---- the tensor metatable ---- */

/* x:numel() -> the element count of tensor x, as a Lua integer. */
static int l_numel(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)shape_numel(tshape(L, fe_tensor(L, 1, "numel"))));
  return 1;
}

/* Pushes a fresh Lua array of the dims. */
static void push_shape(lua_State *L, const Shape *s) {
  lua_createtable(L, s->rank, 0);
  for (int i = 0; i < s->rank; i++) {
    lua_pushinteger(L, (lua_Integer)s->dim[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* t:size() -> shape array; t:size(dim) -> that dim. */
static int l_size(lua_State *L) {
  const Shape *s = tshape(L, fe_tensor(L, 1, "size"));
  if (lua_isnoneornil(L, 2)) {
    push_shape(L, s);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)s->dim[fe_dim(L, fe_int_arg(L, 2, "size", "dim"), s->rank, "size")]);
  return 1;
}

/* A state handle's fields shape dtype rank name, from its declaration (reading them is
 * no read of the state); 0 for other keys. */
static int state_field(lua_State *L, const StateDecl *d, const char *k) {
  if (strcmp(k, "shape") == 0) push_shape(L, &d->shape);
  else if (strcmp(k, "dtype") == 0) lua_pushstring(L, dtype_name(d->dtype));
  else if (strcmp(k, "rank") == 0) lua_pushinteger(L, d->shape.rank);
  else if (strcmp(k, "name") == 0) lua_pushstring(L, d->name);
  else return 0;
  return 1;
}

/* __index: fields shape dtype rank id name, then methods (upvalue 1), else an error. */
static int l_tensor_index(lua_State *L) {
  const StateDecl *d = fe_state_of(L, 1);
  if (d && lua_type(L, 2) == LUA_TSTRING && state_field(L, d, lua_tostring(L, 2))) return 1;
  if (d && lua_type(L, 2) == LUA_TSTRING && lua_getfield(L, lua_upvalueindex(1), lua_tostring(L, 2)) != LUA_TNIL) return 1;
  Node *n = tnode(L, fe_tensor(L, 1, "index"));
  const char *k = lua_tostring(L, 2);
  if (lua_type(L, 2) != LUA_TSTRING) return fe_error(L, "tensors cannot be indexed by a %s (use slice)", luaL_typename(L, 2));
  if (strcmp(k, "shape") == 0) push_shape(L, &n->shape);
  else if (strcmp(k, "dtype") == 0) lua_pushstring(L, dtype_name(n->dtype));
  else if (strcmp(k, "rank") == 0) lua_pushinteger(L, n->shape.rank);
  else if (strcmp(k, "id") == 0) lua_pushinteger(L, n->id);
  else if (strcmp(k, "name") == 0) {
    if (n->name) lua_pushstring(L, n->name);
    else lua_pushnil(L);
  } else if (lua_getfield(L, lua_upvalueindex(1), k) == LUA_TNIL)
    return fe_error(L, "tensor has no field or method '%s'", k);
  return 1;
}

/* __tostring: "tensor(%5 add f32[2, 3] 'layers.0.fc')", "state(layers.0.k f32[4, 512, 8])" */
static int l_tensor_tostring(lua_State *L) {
  const StateDecl *d = fe_state_of(L, 1);
  if (d) {
    lua_pushfstring(L, "state(%s %s%s)", d->name, dtype_name(d->dtype), shape_str(&d->shape));
    return 1;
  }
  Node *n = tnode(L, fe_tensor(L, 1, "tostring"));
  lua_pushfstring(L, "tensor(%%%d %s %s%s", n->id, kiln_ops[n->op].name, dtype_name(n->dtype), shape_str(&n->shape));
  if (n->name) lua_pushfstring(L, " '%s')", n->name);
  else lua_pushstring(L, ")");
  lua_concat(L, 2);
  return 1;
}

/* __eq would have to return a boolean in Lua 5.4; comparisons are methods (t:lt(u)). */
static int l_tensor_compare(lua_State *L) {
  return fe_error(L, "tensors cannot be compared with < or <=: use t:lt(u), t:le(u), t:gt(u), t:ge(u), t:eq(u)");
}

/* Fills the tensor metatable (top of stack; the kiln table is just below it). */
void fe_register_tensor_mt(lua_State *L) {
  static const struct { const char *mm; OpKind op; } arith[] = {
      {"__add", OP_ADD}, {"__sub", OP_SUB}, {"__mul", OP_MUL}, {"__div", OP_DIV}, {"__pow", OP_POW}};
  for (size_t i = 0; i < sizeof arith / sizeof arith[0]; i++) set_op_closure(L, arith[i].mm, l_binary, arith[i].op);
  set_op_closure(L, "__unm", l_unary, OP_NEG);
  lua_pushcfunction(L, l_tensor_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, l_tensor_compare);
  lua_setfield(L, -2, "__lt");
  lua_pushcfunction(L, l_tensor_compare);
  lua_setfield(L, -2, "__le");
  lua_newtable(L);                                   /* methods */
  for (int i = 0; method_names[i]; i++) {
    lua_getfield(L, -3, method_names[i]);
    if (lua_isnil(L, -1)) die("tensor method %s is not a kiln function", method_names[i]);
    lua_setfield(L, -2, method_names[i]);
  }
  lua_pushcfunction(L, l_numel);
  lua_setfield(L, -2, "numel");
  lua_pushcfunction(L, l_size);
  lua_setfield(L, -2, "size");
  lua_pushvalue(L, -1);                              /* ops.lua adds its methods here */
  lua_setfield(L, LUA_REGISTRYINDEX, "kiln.methods");
  lua_pushcclosure(L, l_tensor_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, "kiln.Tensor");
  lua_setfield(L, -2, "__name");
}
