/*
 * lua_entry.c — persistent state and entry points in the Lua frontend: kiln.state,
 * kiln.write, kiln.entry, and how a tensor crosses from one traced graph to another.
 *
 *  - kiln.entry(name, fn) traces fn into a graph of its own (an entry of the
 *    Program). The script's top level is graph 0: without kiln.entry it is the
 *    model; with entries it only holds what the entries share.
 *  - A tensor lives in the graph it was traced in. Used in another graph, it is
 *    imported: the nodes it is computed from are copied over once (memoised per
 *    pair of graphs), weights by name, so a parameter or a table computed from
 *    parameters at the top level, or in another entry, is simply available. A value
 *    that depends on some graph's inputs or state cannot be: that is an error.
 *  - kiln.state declares a state at the top level and returns a handle. Used where
 *    a tensor is expected, a handle stands for the state's current version in the
 *    entry being traced: a STATE leaf on first use, then the result of the last
 *    kiln.write (Graph.state_last). The graph stays functional; targets store every
 *    version in place (docs/pipeline.md, "State").
 */
#include "frontend.h"

#include <stdlib.h>
#include <string.h>

/* n rounded up to a multiple of KILN_ALIGN (n >= 0). */
static int64_t align_up(int64_t n) { return (n + KILN_ALIGN - 1) / KILN_ALIGN * KILN_ALIGN; }

/* How messages name graph gi: "entry 'decode'" or "the top level". */
static const char *graph_label(const FeProgram *fp, int gi) {
  return gi == 0 ? "the top level" : kiln_fmt("entry '%s'", fp->graphs[gi]->entry);
}

/* ---- the import memo: (dst, src, id) -> id in dst ---- */

/* The packed key of an import (never 0: the table's free marker). */
static uint64_t memo_key(int dst, int src, int id) {
  return ((uint64_t)(uint16_t)dst << 48 | (uint64_t)(uint16_t)src << 32 | (uint32_t)id) + 1;
}

/* The slot of key: where it is, or the free slot where it would go. */
static size_t memo_find(const FeProgram *fp, uint64_t key) {
  size_t i = (size_t)(kiln_fnv1a64(&key, sizeof key) & (fp->memo_cap - 1));
  while (fp->memo_key[i] && fp->memo_key[i] != key) i = (i + 1) & (fp->memo_cap - 1);
  return i;
}

/* The id id of graph src already has in graph dst, or -1. */
static int memo_get(const FeProgram *fp, int dst, int src, int id) {
  if (!fp->memo_cap) return -1;
  size_t i = memo_find(fp, memo_key(dst, src, id));
  return fp->memo_key[i] ? fp->memo_val[i] : -1;
}

/* Records that node id of src is node val of dst (doubling the table past half full). */
static void memo_put(FeProgram *fp, int dst, int src, int id, int val) {
  if (2 * (fp->memo_n + 1) > fp->memo_cap) {
    uint64_t *keys = fp->memo_key;
    int *vals = fp->memo_val;
    size_t old = fp->memo_cap;
    fp->memo_cap = old ? 2 * old : 256;
    fp->memo_key = kiln_alloc(sizeof(uint64_t) * fp->memo_cap);
    fp->memo_val = kiln_alloc(sizeof(int) * fp->memo_cap);
    for (size_t i = 0; i < old; i++)
      if (keys[i]) {
        size_t j = memo_find(fp, keys[i]);
        fp->memo_key[j] = keys[i];
        fp->memo_val[j] = vals[i];
      }
  }
  size_t i = memo_find(fp, memo_key(dst, src, id));
  if (!fp->memo_key[i]) fp->memo_n++;
  fp->memo_key[i] = memo_key(dst, src, id);
  fp->memo_val[i] = val;
}

/* ---- importing a tensor into the current graph ---- */

/* Ascending ints, for qsort. */
static int by_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The user's error for importing node x of src, which depends on leaf n of src (an
 * input or a state): such a value exists only while that graph runs. */
static _Noreturn void import_error(lua_State *L, int src, const Node *x, const Node *n) {
  FeProgram *fp = fe_prog(L);
  const char *what = n->op == OP_INPUT ? kiln_fmt("input '%s'", n->name ? n->name : "?")
                                       : kiln_fmt("state %s", n->name ? n->name : "?");
  fe_error(L, "a tensor from %s (%s, %s:%d) depends on %s there, so it cannot be used in %s: compute it inside "
           "this entry (only values made from parameters and constants are shared)",
           graph_label(fp, src), kiln_ops[x->op].name, x->loc.file ? x->loc.file : "?", x->loc.line, what,
           graph_label(fp, fp->cur));
  abort();   /* fe_error does not return */
}

/* The nodes of src that node id needs and dst lacks, in ascending (topological) order;
 * an input or a state among them is an error. */
static int *import_list(lua_State *L, int src, int id, int *count) {
  FeProgram *fp = fe_prog(L);
  Graph *sg = fp->graphs[src];
  bool *seen = kiln_alloc((size_t)sg->nnodes + 1);
  size_t edges = 1;   /* a node is pushed at most once per consumer */
  for (int i = 0; i <= id; i++) edges += (size_t)sg->nodes[i]->nin;
  int *stack = kiln_alloc(sizeof(int) * edges), *list = kiln_alloc(sizeof(int) * (size_t)(id + 1));
  int ns = 0, nl = 0;
  stack[ns++] = id;
  while (ns) {
    int x = stack[--ns];
    if (seen[x]) continue;
    seen[x] = true;
    if (memo_get(fp, fp->cur, src, x) >= 0) continue;
    const Node *n = sg->nodes[x];
    if (n->op == OP_INPUT || n->op == OP_STATE) import_error(L, src, sg->nodes[id], n);
    list[nl++] = x;
    for (int k = 0; k < n->nin; k++)
      if (!seen[n->in[k]]) stack[ns++] = n->in[k];
  }
  qsort(list, (size_t)nl, sizeof(int), by_int);
  *count = nl;
  return list;
}

/* Node id of graph src, copied into the current graph with everything it is computed
 * from (once: later uses find the copy). Leaves keep their name and data, so weights
 * stay one tensor of the shared weights blob; every copy keeps its Lua line. */
static int import_node(lua_State *L, int src, int id) {
  FeProgram *fp = fe_prog(L);
  int dst = fp->cur, hit = memo_get(fp, dst, src, id);
  if (hit >= 0) return hit;
  Graph *sg = fp->graphs[src], *dg = fp->graphs[dst];
  int n = 0, *list = import_list(L, src, id, &n);
  for (int i = 0; i < n; i++) {
    const Node *x = sg->nodes[list[i]];
    Node *m;
    if (kiln_ops[x->op].family == FAM_LEAF) {
      m = graph_leaf(dg, x->op, x->dtype, &x->shape, x->name, x->loc);
      m->data = x->data;
      m->src = x->src;
      m->a = x->a;
    } else {
      int *in = kiln_alloc(sizeof(int) * (size_t)(x->nin + 1));
      for (int k = 0; k < x->nin; k++) in[k] = memo_get(fp, dst, src, x->in[k]);
      char err[512];
      m = graph_add(dg, x->op, in, x->nin, &x->a, x->loc, err, sizeof err);
      if (!m) die("import of %%%d (%s): %s", x->id, kiln_ops[x->op].name, err);   /* same shapes: cannot fail */
      m->name = x->name;
    }
    memo_put(fp, dst, src, x->id, m->id);
  }
  return memo_get(fp, dst, src, id);
}

/* ---- state reads ---- */

/* The node holding state s in the current graph: the last kiln.write's result, or a
 * STATE leaf made on first use, at the user's line. */
static int state_version(lua_State *L, int s) {
  FeProgram *fp = fe_prog(L);
  Graph *g = fp->graphs[fp->cur];
  int v = graph_state_last(g, s);
  if (v >= 0) return v;
  if (fp->cur == 0 && fp->prog->explicit_entries)
    fe_error(L, "state %s is used outside kiln.entry (a script with entries reads and writes state inside them)",
             fp->prog->states[s].name);
  const StateDecl *d = &fp->prog->states[s];
  Node *n = graph_leaf(g, OP_STATE, d->dtype, &d->shape, d->name, fe_loc(L));
  n->a.state = s;
  graph_set_state_last(g, s, n->id);
  return n->id;
}

/* Contract in frontend.h. */
int fe_resolve(lua_State *L, const FeTensor *t) {
  FeProgram *fp = fe_prog(L);
  if (t->state >= 0) return state_version(L, t->state);
  if (t->graph == fp->cur) return t->id;
  return import_node(L, t->graph, t->id);
}

/* ---- kiln.state ---- */

/* kiln.state(name, shape [, dtype]) -> a state handle: caller-owned, persistent,
 * zero when fresh, at a fixed offset of the state block (declaration order). */
static int l_state(lua_State *L) {
  FeProgram *fp = fe_prog(L);
  Program *p = fp->prog;
  if (fp->cur != 0) fe_error(L, "kiln.state: declare states at the top level of the script, not inside kiln.entry");
  const char *name = kiln_strdup(fe_name_arg(L, 1, "kiln.state", "argument 1 (the name)"));
  if (!name[0]) fe_error(L, "kiln.state: argument 1 (the name) is empty");
  Shape s = fe_shape_arg(L, 2, "kiln.state", "shape");
  DType t = fe_dtype_arg(L, 3, "kiln.state");
  if (!lua_isnone(L, 4)) fe_error(L, "kiln.state: takes a name, a shape and an optional dtype (zero is the only start value)");
  for (int i = 0; i < p->nstates; i++)
    if (strcmp(p->states[i].name, name) == 0)
      fe_error(L, "kiln.state: state %s is already declared at %s:%d", name, p->states[i].loc.file, p->states[i].loc.line);
  int64_t bytes = shape_numel(&s) * dtype_size(t);
  if (p->state_size + bytes > KILN_MAX_NUMEL)
    fe_error(L, "kiln.state: state %s would make the state block larger than %d bytes", name, KILN_MAX_NUMEL);
  StateDecl *v = kiln_alloc(sizeof(StateDecl) * (size_t)(p->nstates + 1));
  if (p->nstates) memcpy(v, p->states, sizeof(StateDecl) * (size_t)p->nstates);
  v[p->nstates] = (StateDecl){name, t, s, fe_loc(L), p->state_size};
  p->state_size = align_up(p->state_size + bytes);
  p->states = v;
  FeTensor *h = lua_newuserdatauv(L, sizeof(FeTensor), 0);
  *h = (FeTensor){0, 0, p->nstates++};
  luaL_setmetatable(L, FE_TENSOR_MT);
  return 1;
}

/* ---- kiln.write ---- */

/* The node owning x's bytes: RESHAPE views followed down. */
static const Node *storage_of(lua_State *L, int x) {
  const Node *n = fe_node(L, x);
  while (n->op == OP_RESHAPE) n = fe_node(L, n->in[0]);
  return n;
}

/* Option key of the table at idx (pushed), after refusing keys other than axis and at. */
static void write_opts(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || fe_is_tensor(L, idx))
    fe_error(L, "kiln.write: argument 3 must be an options table {axis = a, at = offset}, got %s", luaL_typename(L, idx));
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)";
    if (strcmp(k, "axis") != 0 && strcmp(k, "at") != 0 && strcmp(k, "ring") != 0)
      fe_error(L, "kiln.write: unknown option '%s' (known: axis, at, ring)", k);
  }
}

/* The offset option: a Lua integer (an i32 scalar constant, checked against the rows
 * the value fills) or an i32 scalar input of the entry. The C target checks a run-time
 * offset before any kernel runs, so it must be available then: computed offsets are
 * refused. */
static int write_offset(lua_State *L, int opts, const StateDecl *d, int axis, int64_t rows, bool ring) {
  int t = lua_getfield(L, opts, "at");
  if (t == LUA_TNIL) fe_error(L, "kiln.write: needs the offset: {axis = %d, at = pos}", axis);
  int id;
  if (t == LUA_TNUMBER) {
    int64_t v = fe_int_arg(L, -1, "kiln.write", "at");
    if (ring && (v < 0 || v > INT32_MAX))
      fe_error(L, "kiln.write: ring offset %lld must be in [0, 2^31)", (long long)v);
    if (!ring && (v < 0 || v > d->shape.dim[axis] - rows))
      fe_error(L, "kiln.write: offset %lld puts %lld row%s outside [0, %lld) along axis %d of state %s %s", (long long)v,
               (long long)rows, rows == 1 ? "" : "s", (long long)d->shape.dim[axis], axis, d->name, shape_str(&d->shape));
    Shape scalar = {0};
    Node *c = graph_leaf(fe_graph(L), OP_CONST, DT_I32, &scalar, fe_scope_name(L), fe_loc(L));
    c->data = kiln_alloc(sizeof(int32_t));
    *(int32_t *)c->data = (int32_t)v;
    id = c->id;
  } else {
    id = fe_tensor(L, lua_gettop(L), "kiln.write");
    const Node *n = fe_node(L, id);
    if (n->dtype != DT_I32 || n->shape.rank != 0)
      fe_error(L, "kiln.write: at must be an i32 scalar or an integer, got %s%s", dtype_name(n->dtype), shape_str(&n->shape));
    if (n->op != OP_INPUT && n->op != OP_CONST)
      fe_error(L, "kiln.write: at must be an input of the entry or an integer (generated code checks it before running "
               "anything; a computed offset is not supported yet)");
  }
  lua_pop(L, 1);
  return id;
}

/* kiln.write(state, value, {axis = a, at = offset [, ring = true]}): stores value into
 * the state at offset along axis (ring: row i at (offset + i) mod the state's length, so
 * a sliding window's cache wraps); the state's other dims must equal value's. In the
 * entry from here on, the state handle reads the updated state. */
static int l_write(lua_State *L) {
  FeProgram *fp = fe_prog(L);
  const StateDecl *d = fe_state_of(L, 1);
  if (!d) fe_error(L, "kiln.write: argument 1 must be a state (from kiln.state), got %s",
                   fe_is_tensor(L, 1) ? "a tensor" : luaL_typename(L, 1));
  int s = (int)(d - fp->prog->states);
  int x = fe_tensor(L, 2, "kiln.write");
  write_opts(L, 3);
  int64_t ax = 0;
  if (lua_getfield(L, 3, "axis") != LUA_TNIL) ax = fe_int_arg(L, -1, "kiln.write", "axis");
  lua_pop(L, 1);
  int axis = fe_dim(L, ax, d->shape.rank, "kiln.write");
  const Node *v = fe_node(L, x);
  bool fits = v->shape.rank == d->shape.rank;
  for (int i = 0; fits && i < d->shape.rank; i++) fits = i == axis ? v->shape.dim[i] <= d->shape.dim[i] : v->shape.dim[i] == d->shape.dim[i];
  if (!fits)
    fe_error(L, "kiln.write: value %s does not fit state %s %s along axis %d (the other dims must equal the state's)",
             shape_str(&v->shape), d->name, shape_str(&d->shape), axis);
  if (v->dtype != d->dtype) fe_error(L, "kiln.write: value is %s, state %s is %s", dtype_name(v->dtype), d->name, dtype_name(d->dtype));
  bool ring = false;
  if (lua_getfield(L, 3, "ring") != LUA_TNIL) {
    if (!lua_isboolean(L, -1)) fe_error(L, "kiln.write: ring must be true or false");
    ring = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  int at = write_offset(L, 3, d, axis, v->shape.dim[axis], ring);
  const Node *root = storage_of(L, x);
  if (root->op == OP_STATE || root->op == OP_WRITE) x = fe_add(L, OP_COPY, &x, 1, NULL);   /* never copy a state onto itself */
  int in[3];
  in[0] = state_version(L, s);
  in[1] = x;
  in[2] = at;
  Attrs a = {.axis = axis, .state = s, .ring = ring};
  int w = fe_add(L, OP_WRITE, in, 3, &a);
  fe_node(L, w)->name = d->name;   /* a version of the state: its kernel is <state>_write */
  graph_set_state_last(fe_graph(L), s, w);
  return 0;
}

/* ---- kiln.entry ---- */

/* __close of the guard l_entry opens: tracing returns to the top level, error or not. */
static int l_entry_close(lua_State *L) {
  fe_prog(L)->cur = 0;
  return 0;
}

/* An entry name becomes <model>_<name> and <MODEL>_<NAME>_... macros: a C identifier,
 * not a keyword, not "reset" (<model>_reset zeroes the state) nor a stem of the model's
 * own macros (<MODEL>_WEIGHTS_FILE_SIZE would clash with an input "file" of an entry
 * "weights"), distinct from the other entries even in case and from their _v variants. */
static void check_entry_name(lua_State *L, const char *name) {
  FeProgram *fp = fe_prog(L);
  static const char *const reserved[] = {"reset", "weights", "state", "arena", NULL};
  if (!fe_is_c_identifier(name) || strlen(name) > 64)
    fe_error(L, "kiln.entry: name '%s' is not a C identifier of at most 64 characters", name);
  bool taken = emit_is_c_keyword(name);
  for (int i = 0; reserved[i]; i++) taken |= fe_same_ignoring_case(name, reserved[i]);
  if (taken)
    fe_error(L, "kiln.entry: name '%s' is reserved (a C keyword, or one of reset, weights, state, arena: the "
             "generated <model>_reset and <MODEL>_WEIGHTS_/STATE_/ARENA_ macros)", name);
  for (int i = 1; i < fp->ngraphs; i++) {
    const char *o = fp->graphs[i]->entry;
    if (fe_same_ignoring_case(o, name)) fe_error(L, "kiln.entry: entry '%s' is already defined (names must differ even in case)", o);
    if (fe_same_ignoring_case(kiln_fmt("%s_v", o), name) || fe_same_ignoring_case(kiln_fmt("%s_v", name), o))
      fe_error(L, "kiln.entry: names '%s' and '%s' would clash in C (<model>_%s_v)", o, name, o);
  }
}

/* kiln.entry(name, fn): traces fn() as the entry point name (its own inputs, outputs
 * and kernels; parameters and states shared with the other entries). */
static int l_entry(lua_State *L) {
  FeProgram *fp = fe_prog(L);
  if (fp->cur != 0) fe_error(L, "kiln.entry: entries do not nest (this is inside entry '%s')", fp->graphs[fp->cur]->entry);
  if (lua_type(L, 1) != LUA_TSTRING) fe_error(L, "kiln.entry: argument 1 (the name) must be a string, got %s", luaL_typename(L, 1));
  const char *name = lua_tostring(L, 1);
  check_entry_name(L, name);
  if (lua_type(L, 2) != LUA_TFUNCTION) fe_error(L, "kiln.entry: argument 2 must be a function, got %s", luaL_typename(L, 2));
  if (fp->graphs[0]->ninputs || fp->graphs[0]->noutputs)
    fe_error(L, "kiln.entry: the script already declared inputs or outputs outside any entry (declare them inside)");
  Graph *g = program_add_entry(fp->prog, name);
  g->entry_loc = fe_loc(L);
  fp->prog->explicit_entries = true;
  if (fp->ngraphs == fp->capgraphs) {
    int cap = 2 * fp->capgraphs;
    Graph **gs = kiln_alloc(sizeof(Graph *) * (size_t)cap);
    SrcLoc *locs = kiln_alloc(sizeof(SrcLoc) * (size_t)cap);
    memcpy(gs, fp->graphs, sizeof(Graph *) * (size_t)fp->ngraphs);
    memcpy(locs, fp->entry_loc, sizeof(SrcLoc) * (size_t)fp->ngraphs);
    fp->graphs = gs, fp->entry_loc = locs, fp->capgraphs = cap;
  }
  if (fp->ngraphs >= 0xffff) fe_error(L, "kiln.entry: too many entries");
  fp->entry_loc[fp->ngraphs] = fe_loc(L);
  fp->graphs[fp->ngraphs++] = g;
  lua_newuserdatauv(L, 1, 0);                        /* the guard: back to the top level on any exit */
  luaL_setmetatable(L, "kiln.EntryGuard");
  lua_toclose(L, -1);
  fp->cur = fp->ngraphs - 1;
  lua_pushvalue(L, 2);
  lua_call(L, 0, 0);
  return 0;
}

/* Contract in frontend.h. */
void fe_register_entries(lua_State *L) {
  luaL_newmetatable(L, "kiln.EntryGuard");
  lua_pushcfunction(L, l_entry_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"state", l_state}, {"write", l_write}, {"entry", l_entry}, {NULL, NULL}};
  luaL_setfuncs(L, fns, 0);
}

/* Contract in frontend.h. */
void fe_check_entries(FeProgram *fp, const char *script_file) {
  if (!fp->prog->explicit_entries) return;
  const Graph *top = fp->graphs[0];
  for (int i = 0; i < top->nnodes; i++) {
    const Node *n = top->nodes[i];
    if (n->op == OP_INPUT || n->op == OP_STATE || n->op == OP_WRITE)
      kiln_error_at(n->loc, "%s outside kiln.entry: in a script with entries, inputs and state belong inside an entry",
                    n->op == OP_INPUT ? "kiln.input" : n->op == OP_WRITE ? "kiln.write" : "a state read");
  }
  if (top->noutputs) kiln_error_at((SrcLoc){script_file, 0}, "kiln.output outside kiln.entry in a script with entries");
  for (int e = 1; e < fp->ngraphs; e++) {
    const Graph *g = fp->graphs[e];
    bool writes = false;
    for (int s = 0; s < g->nstate_last; s++) writes |= g->state_last[s] >= 0 && g->nodes[g->state_last[s]]->op == OP_WRITE;
    if (!g->noutputs && !writes)
      kiln_error_at(fp->entry_loc[e], "entry %s has no outputs and writes no state (call kiln.output inside it)", g->entry);
  }
}
