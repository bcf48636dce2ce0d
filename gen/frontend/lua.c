/*
 * lua.c — the Lua frontend: runs a model script once and records every tensor
 * operation it performs as a node of one Graph (tracing).
 *
 * Shape of the tracer:
 *  - One lua_State per trace. Its extra space holds the Frontend (the program and
 *    graphs being built, loaded safetensors files, parameter names, nn scope stack),
 *    so no global state exists. Ops go to the current graph: the script's top level,
 *    or the entry kiln.entry is tracing (states, entries and moving tensors between
 *    graphs are lua_entry.c's).
 *  - Tensors are full userdata holding a node id, with the metatable built in
 *    lua_ops.c (operators, methods, fields). Lua numbers used as tensors become
 *    f32 scalar CONST nodes.
 *  - The `kiln` table (global, require "kiln") holds the leaves defined here
 *    (input, output, param, load, constant, seed), the ops from lua_ops.c and
 *    `nn`, the module library written in Lua (gen/frontend/nn.lua, embedded at build
 *    time). Indexing a name kiln lacks raises "unknown op 'foo'".
 *  - Source locations: the user's script is loaded as "@" + the path as given
 *    (its basename when absolute, so no output carries an absolute path);
 *    Kiln's own chunks are "=[kiln] ..." and never count as the user's line.
 *  - Errors: every problem becomes one Lua error; the message handler records
 *    the user's file:line and the bare message while the stack is intact, and
 *    frontend_trace reports it through kiln_error_at (one line, exit 1).
 */
#include "frontend.h"

#include <errno.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
  SafeFile *file;
  const char *shown;            /* path as printed in messages */
  bool strict;                  /* every tensor must be used, every param found */
  bool *used;                   /* per tensor: taken by a kiln.param */
  SrcLoc loc;                   /* the kiln.load call */
} Loaded;

typedef struct {
  const char *name;
  SrcLoc loc;
  bool loaded;                  /* came from a file, not the initialiser */
  int graph, node;              /* its WEIGHT node (FeProgram.graphs index, id) */
} Param;

typedef struct {
  FeProgram fp;                 /* the program and the graphs being traced */
  const char *script_file;      /* SrcLoc file of the script */
  const char *script_dir;       /* directory part of the path as given, "" for none */
  uint64_t seed;
  Loaded *files;
  int nfiles, capfiles;
  Param *params;
  int nparams, capparams;
  const char **scopes;          /* nn module paths, innermost last */
  int nscopes, capscopes;
  struct { const char *cls; SrcLoc made; } *scope_mod;  /* per scope: a built-in nn class and where
                                                           the user created that instance, or cls NULL */
  int capscope_mod;
  struct { const char *key, *name; } *srcs; /* chunk source -> SrcLoc file, interned */
  int nsrcs, capsrcs;
  StrMap *io_names;             /* per graph (FeProgram.graphs), lower-cased input/output names:
                                   +(i+1) input i, -(i+1) output i */
  int cap_io_names;
  bool failed;                  /* the message handler ran */
  SrcLoc err_loc;
  const char *err_msg;
  const char *raise_msg;        /* the last fe_error message, and the user's line when it */
  SrcLoc raise_loc;             /* was raised (inside a coroutine, the handler sees another stack) */
} Frontend;

/* The tracer's state, stashed in the lua_State's extra space when the state was opened. */
static Frontend *fe_of(lua_State *L) { return *(Frontend **)lua_getextraspace(L); }

/* The graph ops are added to now (the top level, or the entry being traced). */
Graph *fe_graph(lua_State *L) {
  FeProgram *fp = &fe_of(L)->fp;
  return fp->graphs[fp->cur];
}

/* The program and every graph being traced (lua_entry.c). */
FeProgram *fe_prog(lua_State *L) { return &fe_of(L)->fp; }

/* Grows an arena array of elem-sized items to hold at least need (old copy left in the arena). */
static void *grow(void *old, int n, int *cap, int need, size_t elem) {
  if (need <= *cap) return old;
  int c = *cap ? *cap * 2 : 16;
  while (c < need) c *= 2;
  void *p = kiln_alloc(elem * (size_t)c);
  if (n) memcpy(p, old, elem * (size_t)n);
  *cap = c;
  return p;
}

/* ---- source locations ---- */

/* The SrcLoc file for a chunk source "@path": the path, or its basename when absolute. */
static const char *display_name(const char *path) {
  if (path[0] != '/') return path;
  const char *slash = strrchr(path, '/');
  return slash[1] ? slash + 1 : path;
}

/* Interns the file name of chunk source src ("@models/x.lua"), one copy per chunk. */
static const char *intern_source(Frontend *fe, const char *src) {
  for (int i = 0; i < fe->nsrcs; i++)
    if (strcmp(fe->srcs[i].key, src) == 0) return fe->srcs[i].name;
  fe->srcs = grow(fe->srcs, fe->nsrcs, &fe->capsrcs, fe->nsrcs + 1, sizeof *fe->srcs);
  fe->srcs[fe->nsrcs].key = kiln_strdup(src);
  fe->srcs[fe->nsrcs].name = kiln_strdup(display_name(src + 1));
  return fe->srcs[fe->nsrcs++].name;
}

/* How deep the stack walks below go. lua_getstack(L, n) costs O(n), so walking a
 * whole stack is quadratic, and a runaway recursion leaves ~200000 frames when it
 * overflows: the frames that matter (the failing call, its caller) are near the top. */
enum { STACK_SCAN = 1000 };

/* The first frame in levels [from, to) of a chunk loaded from a file, or false. */
static bool user_frame(lua_State *L, int from, int to, SrcLoc *loc) {
  lua_Debug ar;
  for (int level = from; level < to && lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar)) continue;
    if (ar.source[0] == '@' && ar.currentline > 0) {
      *loc = (SrcLoc){intern_source(fe_of(L), ar.source), ar.currentline};
      return true;
    }
  }
  return false;
}

/* Contract in frontend.h: the first frame of a chunk loaded from a file ('@'), else the
 * script, line 0. Only the top STACK_SCAN frames are searched, then (a runaway
 * recursion inside Kiln's Lua, e.g. a module whose forward tail-calls itself) the
 * bottom STACK_SCAN, which hold the script's own call into it. */
SrcLoc fe_loc(lua_State *L) {
  SrcLoc loc = {fe_of(L)->script_file, 0};
  lua_Debug ar;
  if (user_frame(L, 0, STACK_SCAN, &loc) || !lua_getstack(L, STACK_SCAN, &ar)) return loc;
  int lo = STACK_SCAN, hi = 2 * STACK_SCAN;      /* the depth: lo exists, hi does not */
  while (lua_getstack(L, hi, &ar)) lo = hi, hi *= 2;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (lua_getstack(L, mid, &ar)) lo = mid;
    else hi = mid;
  }
  int from = hi - STACK_SCAN > STACK_SCAN ? hi - STACK_SCAN : STACK_SCAN;
  user_frame(L, from, hi, &loc);
  return loc;
}

/* Formats into the arena (Lua's own formatter lacks %lld) and raises; never returns. */
int fe_error(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = kiln_vfmt(fmt, ap);
  va_end(ap);
  fe_of(L)->raise_msg = s;
  fe_of(L)->raise_loc = fe_loc(L);
  lua_pushstring(L, s);
  return lua_error(L);
}

/* ---- tensors ---- */

/* Pushes a new tensor userdata for node id of the current graph (with the tensor
 * metatable) onto L's stack. */
void fe_push(lua_State *L, int id) {
  FeTensor *t = lua_newuserdatauv(L, sizeof(FeTensor), 0);
  *t = (FeTensor){fe_of(L)->fp.cur, id, -1};
  luaL_setmetatable(L, FE_TENSOR_MT);
}

/* The node behind tensor id of the current graph; dies on an id not in it (a binding bug). */
Node *fe_node(lua_State *L, int id) { return graph_node(fe_graph(L), id); }

/* The tensor at idx, or NULL. The debug library can give any userdata the tensor
 * metatable (debug.setmetatable(io.stdout, getmetatable(x))), so the block's size and
 * the id are checked too: only a userdata fe_push made passes. */
static FeTensor *to_tensor(lua_State *L, int idx) {
  FeTensor *t = luaL_testudata(L, idx, FE_TENSOR_MT);
  if (!t) return NULL;
  FeProgram *fp = &fe_of(L)->fp;
  bool ok = lua_rawlen(L, idx) == sizeof(FeTensor) && t->graph >= 0 && t->graph < fp->ngraphs;
  if (ok && t->state >= 0) ok = t->state < fp->prog->nstates;
  else if (ok) ok = t->id >= 0 && t->id < fp->graphs[t->graph]->nnodes;
  if (!ok) fe_error(L, "a userdata posing as a tensor (its metatable was set by hand)");
  return t;
}

/* Contract in frontend.h. */
const StateDecl *fe_state_of(lua_State *L, int idx) {
  FeTensor *t = to_tensor(L, idx);
  return t && t->state >= 0 ? &fe_of(L)->fp.prog->states[t->state] : NULL;
}

/* Whether the value at idx is a genuine tensor; raises a Lua error on a forged one. */
bool fe_is_tensor(lua_State *L, int idx) { return to_tensor(L, idx) != NULL; }

/* The node id of the tensor argument idx of op; raises a Lua error naming op, the argument
 * and the type it got otherwise (does not return then). */
int fe_tensor(lua_State *L, int idx, const char *op) {
  FeTensor *t = to_tensor(L, idx);
  if (!t) return fe_error(L, "%s: argument %d must be a tensor, got %s", op, idx, luaL_typename(L, idx));
  return fe_resolve(L, t);
}

/* A CONST leaf named after the current scope, data copied into the arena. */
int fe_const_f32(lua_State *L, const float *v, const Shape *s) {
  size_t bytes = sizeof(float) * (size_t)shape_numel(s);
  Node *n = graph_leaf(fe_graph(L), OP_CONST, DT_F32, s, fe_scope_name(L), fe_loc(L));
  n->data = kiln_alloc(bytes);
  memcpy(n->data, v, bytes);
  return n->id;
}

/* A scalar i32 CONST holding v, at the user's line. */
int fe_const_i32(lua_State *L, int32_t v) {
  Shape scalar = {0};
  Node *n = graph_leaf(fe_graph(L), OP_CONST, DT_I32, &scalar, fe_scope_name(L), fe_loc(L));
  n->data = kiln_alloc(sizeof v);
  memcpy(n->data, &v, sizeof v);
  return n->id;
}

/* Like fe_tensor but also accepts a Lua number, which becomes a scalar f32 CONST at the user's
 * line; raises a Lua error on anything else. */
int fe_operand(lua_State *L, int idx, const char *op) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    float v = (float)lua_tonumber(L, idx);
    Shape scalar = {0};
    return fe_const_f32(L, &v, &scalar);
  }
  FeTensor *t = to_tensor(L, idx);
  if (!t) return fe_error(L, "%s: argument %d must be a tensor or a number, got %s", op, idx, luaL_typename(L, idx));
  return fe_resolve(L, t);
}

/* graph_add at the user's line; the node takes the scope's name once the rule accepted it. */
int fe_add(lua_State *L, OpKind op, const int *in, int nin, const Attrs *a) {
  char err[512];
  Node *n = graph_add(fe_graph(L), op, in, nin, a, fe_loc(L), err, sizeof err);
  if (!n) return fe_error(L, "%s", err);
  n->name = fe_scope_name(L);
  return n->id;
}

/* ---- argument helpers ---- */

/* Contract in frontend.h; numeric strings ("2") are refused like any string. */
int64_t fe_int_arg(lua_State *L, int idx, const char *op, const char *what) {
  int isint = 0;
  lua_Integer v = lua_type(L, idx) == LUA_TNUMBER ? lua_tointegerx(L, idx, &isint) : 0;
  if (!isint) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
      lua_Number x = lua_tonumber(L, idx);
      return fe_error(L, "%s: %s must be an integer, got %s", op, what, x != x ? "nan" : lua_tostring(L, idx));
    }
    return fe_error(L, "%s: %s must be an integer, got %s", op, what, luaL_typename(L, idx));
  }
  return (int64_t)v;
}

/* Contract in frontend.h; also bounds the element count (KILN_MAX_NUMEL), checked
 * without overflow, so no later size computation can overflow. */
Shape fe_shape_arg(lua_State *L, int idx, const char *op, const char *what) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx))
    fe_error(L, "%s: %s must be an array of integers like {2, 3}, got %s", op, what, luaL_typename(L, idx));
  Shape s = {0};
  lua_Integer len = luaL_len(L, idx);
  if (len > KILN_MAX_RANK) fe_error(L, "%s: %s has rank %lld; Kiln allows at most %d", op, what, (long long)len, KILN_MAX_RANK);
  s.rank = (int)len;
  for (int i = 0; i < s.rank; i++) {
    lua_geti(L, idx, i + 1);
    char *item = kiln_fmt("%s entry %d", what, i + 1);
    s.dim[i] = fe_int_arg(L, -1, op, item);
    lua_pop(L, 1);
    if (s.dim[i] < 1) fe_error(L, "%s: %s has a dim %lld < 1 (Kiln has no empty tensors)", op, what, (long long)s.dim[i]);
  }
  if (shape_numel_checked(&s) < 0)
    fe_error(L, "%s: %s %s has more than %d elements, Kiln's limit per tensor", op, what, shape_str(&s), KILN_MAX_NUMEL);
  return s;
}

/* A rank-0 tensor accepts dims 0 and -1, as PyTorch does. */
int fe_dim(lua_State *L, int64_t d, int rank, const char *op) {
  int lo = rank ? -rank : -1, hi = rank ? rank - 1 : 0;
  if (d < lo || d > hi)
    return fe_error(L, "%s: dim %lld out of range for a rank-%d tensor (expected %d..%d)", op, (long long)d, rank, lo, hi);
  return d < 0 ? (int)(d + (rank ? rank : 1)) : (int)d;
}

/* A string argument (numbers are not converted) without NUL bytes, which C strings
 * would silently cut. */
static const char *string_arg(lua_State *L, int idx, const char *op, const char *what) {
  size_t len;
  if (lua_type(L, idx) != LUA_TSTRING)
    fe_error(L, "%s: %s must be a string, got %s", op, what, luaL_typename(L, idx));
  const char *s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len) fe_error(L, "%s: %s contains a NUL byte", op, what);
  return s;
}

/* A name that ends up in generated code, comments and JSON (parameter names, nn
 * paths): a string_arg without control characters, which would break lines there. */
static const char *name_arg(lua_State *L, int idx, const char *op, const char *what) {
  const char *s = string_arg(L, idx, op, what);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7f) fe_error(L, "%s: %s contains the control character 0x%02x", op, what, *p);
  return s;
}

/* ---- nn scopes ---- */

/* The innermost open nn scope's path ("layers.0.attn"), or NULL outside any scope or in the
 * root one; names weights and consts so generated code reads like the model. */
const char *fe_scope_name(lua_State *L) {
  Frontend *fe = fe_of(L);
  if (fe->nscopes == 0) return NULL;
  const char *s = fe->scopes[fe->nscopes - 1];
  return s[0] ? s : NULL;
}

/* kiln._scope(path [, class, chunk, line]) -> guard: enters an nn module scope; closing
 * the guard (a to-be-closed local in nn.lua, so also on error) leaves it and any inner
 * ones. class, chunk and line are given for instances of built-in nn classes: the
 * class name and where the user created the instance (kiln._where), so an error in
 * its forward, which runs in nn.lua, can name the user's line of that layer. */
static int l_scope(lua_State *L) {
  Frontend *fe = fe_of(L);
  const char *path = name_arg(L, 1, "nn", "the module path");
  fe->scopes = grow(fe->scopes, fe->nscopes, &fe->capscopes, fe->nscopes + 1, sizeof(char *));
  fe->scope_mod = grow(fe->scope_mod, fe->nscopes, &fe->capscope_mod, fe->nscopes + 1, sizeof *fe->scope_mod);
  fe->scope_mod[fe->nscopes].cls = lua_isstring(L, 2) ? kiln_strdup(lua_tostring(L, 2)) : NULL;
  fe->scope_mod[fe->nscopes].made = (SrcLoc){lua_isstring(L, 3) ? intern_source(fe, lua_tostring(L, 3)) : NULL,
                                             (int)luaL_optinteger(L, 4, 0)};
  fe->scopes[fe->nscopes++] = kiln_strdup(path);
  int *depth = lua_newuserdatauv(L, sizeof(int), 0);
  *depth = fe->nscopes;
  luaL_setmetatable(L, "kiln.Scope");
  return 1;
}

/* kiln._where() -> chunk, line: the user's frame now (a module's creation). */
static int l_where(lua_State *L) {
  lua_Debug ar;
  for (int level = 1; level < STACK_SCAN && lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.source[0] == '@' && ar.currentline > 0) {
      lua_pushstring(L, ar.source);
      lua_pushinteger(L, ar.currentline);
      return 2;
    }
  }
  return 0;
}

/* __close of a scope guard: drops its scope and any inner one left open. */
static int l_scope_close(lua_State *L) {
  Frontend *fe = fe_of(L);
  int *depth = luaL_checkudata(L, 1, "kiln.Scope");
  if (fe->nscopes >= *depth) fe->nscopes = *depth - 1;
  return 0;
}

/* ---- names of inputs and outputs ---- */

/* [A-Za-z_][A-Za-z0-9_]*: input and output names become C identifiers in generated code. */
static bool is_c_identifier(const char *s) {
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (s++; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) return false;
  return true;
}

/* ASCII case-insensitive equality (names become upper-cased macros). */
static bool same_ignoring_case(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a, y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
    if (x != y) return false;
  }
  return *a == *b;
}

/* The input and output names of the graph being traced (each entry has its own). */
static StrMap *io_names(lua_State *L) {
  Frontend *fe = fe_of(L);
  if (fe->cap_io_names < fe->fp.ngraphs) {
    StrMap *m = kiln_alloc(sizeof(StrMap) * (size_t)fe->fp.capgraphs);
    if (fe->cap_io_names) memcpy(m, fe->io_names, sizeof(StrMap) * (size_t)fe->cap_io_names);
    fe->io_names = m;
    fe->cap_io_names = fe->fp.capgraphs;
  }
  return &fe->io_names[fe->fp.cur];
}

/* Input and output names become C parameters and upper-cased macros
 * (MLP_IMAGE_SIZE), so they must be identifiers, not keywords, distinct even in
 * case, and not collide with the model's own macros (MLP_WEIGHTS_SIZE, MLP_ARENA_SIZE). */
static void check_io_name(lua_State *L, const char *name, const char *what) {
  Graph *g = fe_graph(L);
  if (strlen(name) > 255)   /* C99 promises string literals of 4095 bytes, 63 significant identifier characters */
    fe_error(L, "%s: a name of %zu characters; Kiln allows at most 255 (it becomes C identifiers and string literals)", what,
             strlen(name));
  if (!is_c_identifier(name)) fe_error(L, "%s: name '%s' is not a C identifier (letters, digits, _; not starting with a digit)", what, name);
  if (emit_is_c_keyword(name)) fe_error(L, "%s: name '%s' is a C keyword", what, name);
  if (name[0] == '_' && (name[1] == '_' || (name[1] >= 'A' && name[1] <= 'Z')))
    fe_error(L, "%s: name '%s' is reserved in C (leading __ or _ and a capital)", what, name);
  if (same_ignoring_case(name, "weights") || same_ignoring_case(name, "arena"))
    fe_error(L, "%s: name '%s' is reserved (it would clash with the generated WEIGHTS/ARENA macros)", what, name);
  char *lower = kiln_strdup(name);
  for (char *p = lower; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p + 32);
  int *seen = strmap_get(io_names(L), lower);
  if (seen && *seen > 0)
    fe_error(L, "%s: name '%s' is already used by input '%s' (names must differ even in case)", what, name,
             g->inputs[*seen - 1].name);
  if (seen)
    fe_error(L, "%s: name '%s' is already used by output '%s' (names must differ even in case)", what, name,
             g->outputs[-*seen - 1].name);
}

/* Records name as input or output number i (after check_io_name passed). */
static void note_io_name(lua_State *L, const char *name, bool output, int i) {
  char *lower = kiln_strdup(name);
  for (char *p = lower; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p + 32);
  *strmap_put(io_names(L), lower) = output ? -(i + 1) : i + 1;
}

/* An optional dtype name argument; f32 when absent. */
static DType dtype_arg(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return DT_F32;
  const char *s = lua_tostring(L, idx);
  DType t = DT_F32;
  if (lua_type(L, idx) == LUA_TSTRING && strcmp(s, "i64") == 0) {   /* PyTorch's token ids: inputs only */
    if (strcmp(op, "kiln.input") == 0) return DT_I64;
    fe_error(L, "%s: dtype i64 is for kiln.input only (it is cast to i32 at once); use \"i32\"", op);
  }
  if (lua_type(L, idx) != LUA_TSTRING || !dtype_parse(s, &t))
    fe_error(L, "%s: dtype must be \"f32\", \"i32\" or \"bool\", got %s", op, s ? s : luaL_typename(L, idx));
  return t;
}

/* The helpers above, for the state and entry bindings (lua_entry.c). */
const char *fe_name_arg(lua_State *L, int idx, const char *op, const char *what) { return name_arg(L, idx, op, what); }
DType fe_dtype_arg(lua_State *L, int idx, const char *op) { return dtype_arg(L, idx, op); }
bool fe_is_c_identifier(const char *s) { return is_c_identifier(s); }
bool fe_same_ignoring_case(const char *a, const char *b) { return same_ignoring_case(a, b); }

/* ---- leaves: kiln.input / output / seed ---- */

/* kiln.input(name, shape [, dtype]) -> tensor */
static int l_input(lua_State *L) {
  Frontend *fe = fe_of(L);
  const char *name = string_arg(L, 1, "kiln.input", "argument 1 (the input's name)");
  check_io_name(L, name, "kiln.input");
  Shape s = fe_shape_arg(L, 2, "kiln.input", "shape");
  DType t = dtype_arg(L, 3, "kiln.input");
  if (fe->fp.cur == 0 && fe->fp.prog->explicit_entries)
    fe_error(L, "kiln.input: outside kiln.entry in a script with entries (inputs belong to an entry)");
  Node *n = graph_leaf(fe_graph(L), OP_INPUT, t, &s, name, fe_loc(L));
  note_io_name(L, name, false, n->io_index);
  if (t != DT_I64) {
    fe_push(L, n->id);
    return 1;
  }
  /* i64: the script sees its i32 cast only; each entry checks the range first */
  int x = n->id;
  fe_push(L, fe_add(L, OP_CAST, &x, 1, &(Attrs){.to = DT_I32}));
  return 1;
}

/* kiln.output(name, tensor): marks a graph output, in call order. */
static int l_output(lua_State *L) {
  const char *name = string_arg(L, 1, "kiln.output", "argument 1 (the output's name)");
  if (!fe_is_tensor(L, 2)) return fe_error(L, "kiln.output: argument 2 must be a tensor, got %s", luaL_typename(L, 2));
  if (fe_of(L)->fp.cur == 0 && fe_of(L)->fp.prog->explicit_entries)
    fe_error(L, "kiln.output: outside kiln.entry in a script with entries (outputs belong to an entry)");
  int id = fe_tensor(L, 2, "kiln.output");
  check_io_name(L, name, "kiln.output");
  note_io_name(L, name, true, fe_graph(L)->noutputs);
  graph_output(fe_graph(L), name, id);
  return 0;
}

/* kiln.seed(n): seed for parameters initialised from now on. */
static int l_seed(lua_State *L) {
  fe_of(L)->seed = (uint64_t)fe_int_arg(L, 1, "kiln.seed", "the seed");
  return 0;
}

/* ---- kiln.load ---- */

/* A metadata value as Lua sees it: integers, floats, booleans, strings, arrays as
 * sequences (1-based). */
static void push_meta(lua_State *L, const MetaVal *v) {
  luaL_checkstack(L, 3, "kiln.load: metadata nested too deep");
  switch (v->kind) {
  case MV_INT: lua_pushinteger(L, v->i); break;
  case MV_FLOAT: lua_pushnumber(L, v->f); break;
  case MV_BOOL: lua_pushboolean(L, v->b); break;
  case MV_STR: lua_pushlstring(L, v->s, v->slen); break;
  case MV_ARR:
    lua_createtable(L, v->n > INT32_MAX ? 0 : (int)v->n, 0);
    for (int64_t i = 0; i < v->n; i++) {
      push_meta(L, &v->items[i]);
      lua_rawseti(L, -2, i + 1);
    }
    break;
  }
}

/* Whether the file at path starts with GGUF's magic (an unreadable file, or one that is
 * not a regular file — opening a FIFO would wait for a writer —, is not: the safetensors
 * reader then reports why it cannot be read). */
static bool file_is_gguf(const char *path) {
  unsigned char head[4];
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  return gguf_is(head, n);
}

/* names = "meta": llama.cpp's tensor names as Meta's; two tensors may not end up with one name. */
static void rename_meta(lua_State *L, SafeFile *f, const char *shown) {
  StrMap seen = {0};
  for (int i = 0; i < f->ntensors; i++) {
    f->tensors[i].name = gguf_meta_name(f->tensors[i].name);
    if (strmap_get(&seen, f->tensors[i].name))
      fe_error(L, "kiln.load: %s: two tensors are named '%s' once renamed (names = \"meta\")", shown, f->tensors[i].name);
    *strmap_put(&seen, f->tensors[i].name) = 1;
  }
}

/* kiln.load(path [, {strict = false, names = "file"}]) -> array of tensor names (file
 * order), table of the file's metadata. A GGUF file is recognised by its magic, any
 * other is read as safetensors. */
static int l_load(lua_State *L) {
  Frontend *fe = fe_of(L);
  const char *path = string_arg(L, 1, "kiln.load", "argument 1 (the file's path)");
  bool strict = false;
  const char *names = "file";
  if (lua_istable(L, 2)) {
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      lua_pop(L, 1);
      const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
      if (strcmp(k, "strict") != 0 && strcmp(k, "names") != 0) fe_error(L, "kiln.load: unknown option '%s' (strict, names)", k);
    }
    lua_getfield(L, 2, "strict");
    strict = lua_toboolean(L, -1);
    lua_getfield(L, 2, "names");
    if (!lua_isnil(L, -1)) names = lua_type(L, -1) == LUA_TSTRING ? kiln_strdup(lua_tostring(L, -1)) : "?";
    lua_pop(L, 2);
    if (strcmp(names, "file") != 0 && strcmp(names, "meta") != 0)
      fe_error(L, "kiln.load: names must be \"file\" or \"meta\", got %s", esc_message(names));
  } else if (!lua_isnoneornil(L, 2)) {
    return fe_error(L, "kiln.load: argument 2 must be an options table, got %s", luaL_typename(L, 2));
  }
  const char *full = path[0] == '/' || !fe->script_dir[0] ? path : kiln_fmt("%s/%s", fe->script_dir, path);
  const char *why;
  if (sandbox_active(L) && !sandbox_inside(fe->script_dir, full, &why)) return fe_error(L, "kiln.load: %s", why);
  char err[1024];
  bool gguf = file_is_gguf(full);
  SafeFile *f = gguf ? gguf_load(full, err, sizeof err) : safetensors_load(full, err, sizeof err);
  if (!f) return fe_error(L, "%s", err);
  if (strcmp(names, "meta") == 0) {
    if (!gguf) return fe_error(L, "kiln.load: names = \"meta\" renames llama.cpp's tensor names; %s is not a GGUF file", path);
    rename_meta(L, f, path);
  }
  fe->files = grow(fe->files, fe->nfiles, &fe->capfiles, fe->nfiles + 1, sizeof(Loaded));
  fe->files[fe->nfiles++] = (Loaded){f, kiln_strdup(full), strict, kiln_alloc((size_t)f->ntensors + 1), fe_loc(L)};
  lua_createtable(L, f->ntensors, 0);
  for (int i = 0; i < f->ntensors; i++) {
    lua_pushstring(L, f->tensors[i].name);
    lua_rawseti(L, -2, i + 1);
  }
  lua_createtable(L, 0, f->nmeta);
  for (int i = 0; i < f->nmeta; i++) {
    push_meta(L, &f->meta[i].v);
    lua_setfield(L, -2, f->meta[i].key);
  }
  return 2;
}

/* ---- kiln.param ---- */

typedef struct {
  const char *kind;
  double a, b;
} Init;

/* Parses an init table {"uniform", a, b} | {"normal", mean, std} | {"zeros"} |
 * {"ones"} | {"const", v}; nil gives the default {"normal", 0, 0.02}. */
static Init init_arg(lua_State *L, int idx) {
  Init in = {"normal", 0.0, 0.02};
  if (lua_isnoneornil(L, idx)) return in;
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx))
    fe_error(L, "kiln.param: init must be a table like {\"uniform\", -0.1, 0.1}, got %s", luaL_typename(L, idx));
  lua_geti(L, idx, 1);
  const char *kind = lua_type(L, -1) == LUA_TSTRING ? kiln_strdup(lua_tostring(L, -1)) : NULL;
  lua_pop(L, 1);
  static const struct { const char *name; int nargs; } kinds[] = {
      {"uniform", 2}, {"normal", 2}, {"zeros", 0}, {"ones", 0}, {"const", 1}};
  int nargs = -1;
  for (size_t i = 0; kind && i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].name, kind) == 0) nargs = kinds[i].nargs;
  if (nargs < 0) fe_error(L, "kiln.param: init kind must be \"uniform\", \"normal\", \"zeros\", \"ones\" or \"const\", got %s", kind ? kind : "nothing");
  double v[2] = {0, 0};
  for (int i = 0; i < nargs; i++) {
    lua_geti(L, idx, i + 2);
    if (lua_type(L, -1) != LUA_TNUMBER) fe_error(L, "kiln.param: init {\"%s\", ...} needs %d numbers", kind, nargs);
    v[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  if (strcmp(kind, "uniform") == 0 && !(v[0] <= v[1])) fe_error(L, "kiln.param: uniform bounds %g, %g are not ordered", v[0], v[1]);
  if (strcmp(kind, "normal") == 0 && !(v[1] >= 0)) fe_error(L, "kiln.param: normal std %g must be >= 0", v[1]);
  return (Init){kind, v[0], v[1]};
}

/* The first loaded file holding name, or NULL; *which gets its index. */
static SafeTensor *find_loaded(Frontend *fe, const char *name, int *which) {
  for (int i = 0; i < fe->nfiles; i++) {
    SafeTensor *t = safetensors_find(fe->files[i].file, name);
    if (t) {
      *which = i;
      return t;
    }
  }
  return NULL;
}

/* kiln.param(name, shape [, init]) -> tensor: a WEIGHT node, from a loaded file or the
 * initialiser. A name another graph (entry) already defined is that parameter (shapes
 * must agree): entries share parameters by name. */
static int l_param(lua_State *L) {
  Frontend *fe = fe_of(L);
  const char *name = kiln_strdup(name_arg(L, 1, "kiln.param", "argument 1 (the name)"));
  if (!name[0]) return fe_error(L, "kiln.param: argument 1 (the name) is empty");
  Shape s = fe_shape_arg(L, 2, "kiln.param", "shape");
  Init init = init_arg(L, 3);
  for (int i = 0; i < fe->nparams; i++) {
    Param *p = &fe->params[i];
    if (strcmp(p->name, name) != 0) continue;
    if (p->graph == fe->fp.cur)
      return fe_error(L, "param %s is already defined at %s:%d (two modules with the same path? give one a prefix with nn.name)",
                      name, p->loc.file, p->loc.line);
    const Node *w = graph_node(fe->fp.graphs[p->graph], p->node);   /* another entry's: shared by name */
    if (!shape_eq(&w->shape, &s))
      return fe_error(L, "param %s is %s here but %s at %s:%d (entries share parameters by name)", name, shape_str(&s),
                      shape_str(&w->shape), p->loc.file, p->loc.line);
    FeTensor *t = lua_newuserdatauv(L, sizeof(FeTensor), 0);
    *t = (FeTensor){p->graph, p->node, -1};
    luaL_setmetatable(L, FE_TENSOR_MT);
    return 1;
  }
  SrcLoc loc = fe_loc(L);
  int which = -1;
  SafeTensor *t = find_loaded(fe, name, &which);
  WeightSrc *src = kiln_alloc(sizeof *src);   /* values are made when a pass or the writer needs them */
  if (t) {
    Loaded *lf = &fe->files[which];
    if (!t->loads)
      return fe_error(L, "param %s: dtype %s in %s is not supported (Kiln reads F32, F16 and BF16; from GGUF also Q8_0, Q4_0, Q4_K and Q6_K)", name, t->file_dtype, lf->shown);
    if (!shape_eq(&t->shape, &s))
      return fe_error(L, "param %s: shape %s in %s, script says %s", name, shape_str(&t->shape), lf->shown, shape_str(&s));
    lf->used[t - lf->file->tensors] = true;
    *src = (WeightSrc){.file = t};
  } else {
    *src = (WeightSrc){.name = name, .kind = init.kind, .a = init.a, .b = init.b, .seed = fe->seed};
  }
  Node *n = graph_leaf(fe_graph(L), OP_WEIGHT, DT_F32, &s, name, loc);
  n->src = src;
  if (t) n->src_fmt = t->raw_fmt, n->src_raw = t->raw;
  fe->params = grow(fe->params, fe->nparams, &fe->capparams, fe->nparams + 1, sizeof(Param));
  fe->params[fe->nparams++] = (Param){name, loc, t != NULL, fe->fp.cur, n->id};
  fe_push(L, n->id);
  return 1;
}

/* ---- kiln.constant ---- */

typedef struct {
  Shape shape;
  bool shape_known;
  double *v;
  int64_t n, cap;
  int64_t nbool;                /* values given as Lua booleans */
} Flat;

/* Appends one value, doubling the arena array as needed. */
static void flat_put(Flat *f, double x) {
  if (f->n == f->cap) {
    int64_t cap = f->cap ? f->cap * 2 : 64;
    double *v = kiln_alloc(sizeof(double) * (size_t)cap);
    if (f->n) memcpy(v, f->v, sizeof(double) * (size_t)f->n);
    f->v = v;
    f->cap = cap;
  }
  f->v[f->n++] = x;
}

/* One scalar of a constant: a number, or a boolean (1/0). */
static double scalar_value(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TBOOLEAN) return lua_toboolean(L, idx) ? 1.0 : 0.0;
  if (lua_type(L, idx) != LUA_TNUMBER) fe_error(L, "kiln.constant: values must be numbers or booleans, got %s", luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

/* Flattens nested arrays at idx (depth d) into f, inferring the shape from the
 * first element at each depth and checking every array against it. */
static void flatten_values(lua_State *L, int idx, int d, Flat *f) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx)) {
    if (d != f->shape.rank) fe_error(L, "kiln.constant: nested values are not rectangular");
    f->nbool += lua_type(L, idx) == LUA_TBOOLEAN;
    flat_put(f, scalar_value(L, idx));
    return;
  }
  lua_Integer len = luaL_len(L, idx);
  if (d >= KILN_MAX_RANK) fe_error(L, "kiln.constant: values nest deeper than rank %d", KILN_MAX_RANK);
  if (!f->shape_known && d == f->shape.rank) {
    f->shape.dim[f->shape.rank++] = len;
    lua_geti(L, idx, 1);
    bool leaf = !lua_istable(L, -1) || fe_is_tensor(L, -1);
    lua_pop(L, 1);
    if (leaf) f->shape_known = true;
  }
  if (d >= f->shape.rank || f->shape.dim[d] != len) fe_error(L, "kiln.constant: nested values are not rectangular");
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, idx, i);
    flatten_values(L, -1, d + 1, f);
    lua_pop(L, 1);
  }
}

/* Converts value x to dtype t into dst[i], refusing values the dtype cannot hold. */
static void store_value(lua_State *L, void *dst, int64_t i, DType t, double x) {
  if (t == DT_F32) {
    ((float *)dst)[i] = (float)x;
  } else if (t == DT_I32) {
    if (!(x >= -2147483648.0 && x <= 2147483647.0) || x != (double)(int64_t)x)
      fe_error(L, "kiln.constant: %g is not an i32 value", x);
    ((int32_t *)dst)[i] = (int32_t)x;
  } else {
    ((uint8_t *)dst)[i] = x != 0.0;
  }
}

/* kiln.constant(values, shape [, dtype]) -> tensor. values: a number or boolean
 * (filled; shape nil means a scalar) or an array, flat or nested. Without dtype, values
 * that are all booleans make a bool tensor (torch.tensor([True, False])), else f32. */
static int l_constant(lua_State *L) {
  DType t = dtype_arg(L, 3, "kiln.constant");
  Flat f = {0};
  bool have_shape = !lua_isnoneornil(L, 2);
  Shape s = have_shape ? fe_shape_arg(L, 2, "kiln.constant", "shape") : (Shape){0};
  if (lua_istable(L, 1) && !fe_is_tensor(L, 1)) {
    flatten_values(L, 1, 0, &f);
    if (!f.n) return fe_error(L, "kiln.constant: no values (Kiln has no empty tensors)");
    if (!have_shape && (!f.shape_known || f.shape.rank == 0)) return fe_error(L, "kiln.constant: no values");
    if (!have_shape) s = f.shape;
    if (f.n != shape_numel(&s))
      return fe_error(L, "kiln.constant: %lld values do not fill shape %s (%lld elements)", (long long)f.n, shape_str(&s),
                      (long long)shape_numel(&s));
  } else {
    f.nbool += lua_type(L, 1) == LUA_TBOOLEAN;
    double x = scalar_value(L, 1);
    flat_put(&f, x);
  }
  if (lua_isnoneornil(L, 3) && f.nbool == f.n) t = DT_BOOL;   /* all booleans, no dtype: a bool tensor */
  int64_t numel = shape_numel(&s);
  void *data = kiln_alloc((size_t)(numel * dtype_size(t)));
  for (int64_t i = 0; i < numel; i++) store_value(L, data, i, t, f.v[f.n == 1 ? 0 : i]);
  Node *n = graph_leaf(fe_graph(L), OP_CONST, t, &s, fe_scope_name(L), fe_loc(L));
  n->data = data;
  fe_push(L, n->id);
  return 1;
}

/* ---- the kiln table ---- */

/* __index of the kiln table: only reached for names it lacks. */
static int l_unknown_op(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) return fe_error(L, "unknown op '%s'", lua_tostring(L, 2));
  return fe_error(L, "kiln has no field %s", luaL_tolstring(L, 2, NULL));
}

/* package.preload loader: returns the module table held as upvalue 1. */
static int l_return_upvalue(lua_State *L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  return 1;
}

/* package.loaded[name] = value at top, and package.preload[name] returns it. */
static void register_module(lua_State *L, const char *name) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
  lua_getfield(L, -1, "preload");
  lua_pushvalue(L, -3);
  lua_pushcclosure(L, l_return_upvalue, 1);
  lua_setfield(L, -2, name);
  lua_pop(L, 2);
}

static const luaL_Reg leaf_fns[] = {
    {"input", l_input}, {"output", l_output}, {"param", l_param}, {"load", l_load},
    {"constant", l_constant}, {"seed", l_seed}, {"_scope", l_scope}, {"_where", l_where}, {NULL, NULL}};

/* Runs the embedded Lua file path (named name in tracebacks) with the kiln table (top of
 * the stack) and, when extra is not NULL, the registry value extra as arguments; leaves
 * nresults results. A failure is a Kiln bug. */
static void run_embedded(lua_State *L, const char *path, const char *name, const char *extra, int nresults) {
  size_t len;
  const char *src = embedded_get(path, &len);
  if (!src) die("%s is not embedded", path);
  if (luaL_loadbufferx(L, src, len, name, "t") != LUA_OK) die("%s: %s", path, lua_tostring(L, -1));
  lua_pushvalue(L, -2);
  if (extra) lua_getfield(L, LUA_REGISTRYINDEX, extra);
  if (lua_pcall(L, extra ? 2 : 1, nresults, 0) != LUA_OK) die("%s: %s", path, lua_tostring(L, -1));
}


/* Creates the tensor metatable, the kiln table (global + require "kiln") and kiln.nn. */
static void open_kiln(lua_State *L, const FrontendOptions *o, const char *script_dir) {
  luaL_newmetatable(L, "kiln.Scope");
  lua_pushcfunction(L, l_scope_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);

  lua_newtable(L);                               /* kiln */
  luaL_setfuncs(L, leaf_fns, 0);
  fe_register_entries(L);
  fe_register_config(L, o->defines, o->ndefines, script_dir);
  fe_register_ops(L);
  luaL_newmetatable(L, FE_TENSOR_MT);
  fe_register_tensor_mt(L);
  lua_pop(L, 1);
  run_embedded(L, "gen/frontend/ops.lua", "=[kiln] ops.lua", "kiln.methods", 0);   /* composite ops */
  run_embedded(L, "gen/frontend/nn.lua", "=[kiln] nn.lua", NULL, 1);              /* kiln.nn */
  if (!lua_istable(L, -1)) die("nn.lua did not return a table");
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "nn");
  register_module(L, "kiln.nn");
  lua_pop(L, 1);
  lua_newtable(L);                               /* the unknown-op guard, set last */
  lua_pushcfunction(L, l_unknown_op);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "kiln");
  register_module(L, "kiln");
  lua_pop(L, 1);
}

/* ---- errors ---- */

/* Whether msg starts with "<src>:<digits>: "; on success *line and *rest are set. */
static bool has_position(const char *msg, const char *src, int *line, const char **rest) {
  size_t n = strlen(src);
  if (strncmp(msg, src, n) != 0 || msg[n] != ':') return false;
  const char *p = msg + n + 1;
  if (*p < '0' || *p > '9') return false;
  char *end;
  long v = strtol(p, &end, 10);
  if (end[0] != ':' || end[1] != ' ') return false;
  *line = (int)v;
  *rest = end + 2;
  return true;
}

/* Removes the "chunk:line: " prefix Lua puts on runtime errors. A prefix naming a
 * user chunk replaces *loc (error(msg, 2) points at a caller on purpose); one
 * naming Kiln's own Lua is dropped, the user's frame already being in *loc.
 * Prefixes can nest — coroutine.wrap and error(e) add the caller's position to a
 * message that has its own — and the innermost user position is the most precise. */
static const char *strip_position(lua_State *L, const char *msg, SrcLoc *loc) {
  lua_Debug ar;
  bool again = true;
  while (again) {
    again = false;
    for (int level = 0; level < STACK_SCAN && lua_getstack(L, level, &ar); level++) {
      if (!lua_getinfo(L, "S", &ar)) continue;
      int line;
      const char *rest;
      if (!has_position(msg, ar.short_src, &line, &rest)) continue;
      if (ar.source[0] == '@') *loc = (SrcLoc){intern_source(fe_of(L), ar.source), line};
      again = ar.source[0] == '@';
      msg = rest;
      break;
    }
  }
  return msg;
}

/* One line: every run of whitespace holding a newline or tab becomes one space. */
static char *one_line(const char *s) {
  char *out = kiln_alloc(strlen(s) + 1), *o = out;
  while (*s) {
    if (*s == '\n' || *s == '\r' || *s == '\t') {
      while (*s == '\n' || *s == '\r' || *s == '\t' || *s == ' ') s++;
      if (o > out && o[-1] != ' ') *o++ = ' ';
      continue;
    }
    *o++ = *s++;
  }
  *o = 0;
  return out;
}

/* The message handler around the user's script: records where and what, stack intact. */
static int msgh(lua_State *L) {
  Frontend *fe = fe_of(L);
  const char *msg;
  if (lua_type(L, 1) == LUA_TSTRING) msg = lua_tostring(L, 1);
  else if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
  else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  SrcLoc loc = fe_loc(L);
  msg = strip_position(L, msg, &loc);
  if (fe->raise_msg && strcmp(msg, fe->raise_msg) == 0) loc = fe->raise_loc;   /* Kiln's own error: where it was raised */
  /* An error inside a built-in module's forward (nn.lua) would name the line that called
   * the outermost module (model(x)); the layer the user wrote is more useful. */
  if (fe->nscopes > 0 && fe->scope_mod[fe->nscopes - 1].cls && fe->scope_mod[fe->nscopes - 1].made.line > 0) {
    SrcLoc made = fe->scope_mod[fe->nscopes - 1].made;
    if (made.line != loc.line || strcmp(made.file, loc.file ? loc.file : "") != 0) {
      const char *path = fe->scopes[fe->nscopes - 1];
      msg = kiln_fmt("%s (in nn.%s%s%s%s, called at %s:%d)", msg, fe->scope_mod[fe->nscopes - 1].cls, path[0] ? " '" : "",
                     path, path[0] ? "'" : "", loc.file ? loc.file : "?", loc.line);
      loc = made;
    }
  }
  fe->failed = true;
  fe->err_loc = loc;
  fe->err_msg = one_line(msg);
  return 1;
}

/* Reports a load (syntax) error: "chunk:line: message" where chunk is the script's short name. */
static _Noreturn void report_syntax_error(Frontend *fe, const char *msg) {
  SrcLoc loc = {fe->script_file, 0};
  const char *rest = msg;
  int line;
  if (has_position(msg, fe->script_file, &line, &rest)) {
    loc.line = line;
  } else {
    for (const char *p = strchr(msg, ':'); p; p = strchr(p + 1, ':')) {
      char *end;
      long v = strtol(p + 1, &end, 10);
      if (end > p + 1 && end[0] == ':' && end[1] == ' ') {
        loc.line = (int)v;
        rest = end + 2;
        break;
      }
    }
  }
  kiln_error_at(loc, "%s", one_line(rest));
}

/* ---- the script ---- */

/* Reads the whole script; a missing file is the user's error. */
static char *read_script(const char *path, const char *shown, size_t *len) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) kiln_error_at((SrcLoc){shown, 0}, "the model script is a directory");
  FILE *f = fopen(path, "rb");
  if (!f) kiln_error_at((SrcLoc){shown, 0}, "cannot open the model script: %s", strerror(errno));
  Buf b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_put(&b, chunk, n);
  bool bad = ferror(f);
  fclose(f);
  if (bad) kiln_error_at((SrcLoc){shown, 0}, "cannot read the model script");
  char *text = kiln_alloc(b.len + 1);
  if (b.len) memcpy(text, b.data, b.len);
  *len = b.len;
  buf_free(&b);
  return text;
}

/* The model name from the script's base name: "models/mlp.lua" -> "mlp", made an identifier. */
static const char *model_name(const char *script) {
  const char *base = strrchr(script, '/');
  base = base ? base + 1 : script;
  char *name = kiln_strdup(base);
  char *dot = strrchr(name, '.');
  if (dot && dot != name) *dot = 0;
  if (!is_c_identifier(name)) {
    for (char *p = name; *p; p++)
      if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) *p = '_';
    if (!*name || (*name >= '0' && *name <= '9')) name = kiln_fmt("_%s", name);
  }
  return name;
}

/* The model name becomes file names (<m>.h, <m>.c, <m>_metal.h): a header named like
 * one of the C library's or Kiln's runtime's would shadow it for every file compiled
 * with -I on the output directory, the model's own <m>.c included (--name kiln gave a
 * kiln_metal.h that included itself). Compared ignoring case, as macOS file systems do. */
static void check_model_name(const Frontend *fe, const char *name, bool from_option) {
  static const char *const taken[] = {
      "assert", "complex", "ctype", "errno", "fenv", "float", "inttypes", "iso646", "limits", "locale", "math",
      "setjmp", "signal", "stdalign", "stdarg", "stdatomic", "stdbool", "stddef", "stdint", "stdio", "stdlib",
      "stdnoreturn", "string", "tgmath", "threads", "time", "uchar", "wchar", "wctype", "unistd", "strings",
      "pthread", "fcntl", "dirent", "alloca", "malloc", "memory",
      "kiln_runtime", "kiln_metal", "kiln_coreml", NULL};   /* the last three: Kiln's runtime */
  static const char *const suffixes[] = {"", "_metal", NULL};   /* the headers a build writes */
  const char *fix = from_option ? "choose another --name" : "rename the script or pass --name";
  for (int k = 0; suffixes[k]; k++)
    for (int i = 0; taken[i]; i++) {
      const char *header = kiln_fmt("%s%s", name, suffixes[k]);
      if (!same_ignoring_case(header, taken[i])) continue;
      const char *whose = strncmp(taken[i], "kiln_", 5) == 0 ? "Kiln's runtime header" : "the C header";
      const char *msg = kiln_fmt("the model's %s.h would shadow %s <%s.h>; %s", header, whose, taken[i], fix);
      if (from_option) kiln_error("%s", msg);
      kiln_error_at((SrcLoc){fe->script_file, 0}, "%s", msg);
    }
}

/* A tensor a PyTorch state_dict holds for training only, which PyTorch's own strict
 * load_state_dict accepts without a parameter for it: BatchNorm's batch counter. */
static bool bookkeeping(const char *name) {
  const char *dot = strrchr(name, '.');
  return strcmp(dot ? dot + 1 : name, "num_batches_tracked") == 0;
}

/* After the script: it declared outputs (or entries that have some or write state),
 * nothing of an entry's leaked to the top level, and strict files matched the
 * parameters both ways. */
static void check_finished(Frontend *fe) {
  fe_check_entries(&fe->fp, fe->script_file);
  if (!fe->fp.prog->explicit_entries && fe->fp.graphs[0]->noutputs == 0 && fe->fp.prog->nstates == 0)
    kiln_error_at((SrcLoc){fe->script_file, 0}, "no outputs: the script must call kiln.output(name, tensor)");
  for (int i = 0; i < fe->nfiles; i++) {
    Loaded *lf = &fe->files[i];
    if (!lf->strict) continue;
    for (int k = 0; k < lf->file->ntensors; k++)
      if (!lf->used[k] && !bookkeeping(lf->file->tensors[k].name))
        kiln_error_at(lf->loc, "%s: tensor '%s' is not used by any parameter (strict load)", lf->shown,
                      one_line(lf->file->tensors[k].name));
    for (int k = 0; k < fe->nparams; k++)
      if (!fe->params[k].loaded)
        kiln_error_at(fe->params[k].loc, "param %s is not in %s (strict load)", fe->params[k].name, lf->shown);
  }
}

/* Traces o->script into a new Program; every user error exits through kiln_error_at. */
Program *frontend_trace(const FrontendOptions *o) {
  Frontend *fe = kiln_alloc(sizeof *fe);
  fe->script_file = kiln_strdup(display_name(o->script));
  const char *slash = strrchr(o->script, '/');
  fe->script_dir = slash ? kiln_fmt("%.*s", (int)(slash - o->script), o->script) : "";
  if (slash == o->script) fe->script_dir = "/";
  if (o->model && !is_c_identifier(o->model)) kiln_error("--name: '%s' is not a C identifier", o->model);
  check_model_name(fe, o->model ? o->model : model_name(o->script), o->model != NULL);
  const char *model = o->model ? o->model : model_name(o->script);
  fe->fp.prog = program_new(model, fe->script_file);
  fe->fp.graphs = kiln_alloc(sizeof(Graph *) * 4);
  fe->fp.entry_loc = kiln_alloc(sizeof(SrcLoc) * 4);
  fe->fp.capgraphs = 4;
  fe->fp.graphs[fe->fp.ngraphs++] = graph_new(model, fe->script_file);   /* the top level */
  fe->fp.graphs[0]->prog = fe->fp.prog;
  fe->fp.graphs[0]->entry = "run";
  size_t len;
  char *text = read_script(o->script, fe->script_file, &len);

  SandboxOptions so = o->sandbox;
  so.root = fe->script_dir;
  lua_State *L = sandbox_open(&so);
  *(Frontend **)lua_getextraspace(L) = fe;
  open_kiln(L, o, fe->script_dir);

  lua_pushcfunction(L, msgh);
  const char *body = text;
  if (len && text[0] == '#') {                   /* a #! line: skip it, keep the line count */
    while (len && *body != '\n') body++, len--;
  }
  char *chunkname = kiln_fmt("@%s", fe->script_file);
  if (luaL_loadbufferx(L, body, len, chunkname, "t") != LUA_OK) {
    char *msg = kiln_strdup(lua_tostring(L, -1));
    lua_close(L);
    report_syntax_error(fe, msg);
  }
  int status = lua_pcall(L, 0, 0, -2);
  if (status == LUA_ERRMEM && !fe->failed) {     /* Lua raises these without calling the handler */
    const char *cap = sandbox_memory_message(L);
    lua_close(L);
    kiln_error_at((SrcLoc){fe->script_file, 0}, "%s", cap ? cap : "the script ran out of memory (Lua: not enough memory)");
  }
  if (status != LUA_OK) {
    if (!fe->failed) die("Lua error without the message handler: %s", lua_tostring(L, -1));
    lua_close(L);
    kiln_error_at(fe->err_loc, "%s", fe->err_msg);
  }
  fe_check_config(L, fe->script_file);
  lua_close(L);
  check_finished(fe);
  Program *p = fe->fp.prog;
  if (!p->explicit_entries) {   /* the script is its own entry, "run" */
    p->entries = kiln_alloc(sizeof(Graph *));
    p->entries[p->nentries++] = fe->fp.graphs[0];
  }
  return p;
}
