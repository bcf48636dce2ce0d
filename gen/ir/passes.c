/*
 * passes.c — the graph-to-graph passes, in pipeline order: verify, dce, cse,
 * fold, legalize, group, schedule (memplan is in memplan.c).
 *
 * Every pass keeps node ids stable: a removed node stays in Graph.nodes with
 * dead = true, and a new node (legalize's COPY) is appended at the end, which
 * keeps the array topological. Passes are deterministic: they walk nodes in id
 * order and never depend on pointer values or hash order, so the same script
 * gives the same graph, kernels and plan on every run and machine.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

/* The storage a value lives in: follows RESHAPE views down to the node that owns bytes. */
static Node *storage_root(Graph *g, Node *n) {
  while (n->op == OP_RESHAPE) n = graph_node(g, n->in[0]);
  return n;
}

/* ---- verify ---- */

/* True iff s is non-NULL, non-empty and [A-Za-z_][A-Za-z0-9_]* (ASCII only). */
static bool is_c_ident(const char *s) {
  if (!s || !*s) return false;
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (s++; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) return false;
  return true;
}

/* Is n a version of a state (its value lives in the state block)? */
static bool is_state_version(const Node *n) { return n->op == OP_STATE || n->op == OP_WRITE; }

/* STATE and WRITE invariants: the state exists and has the node's type; a write
 * updates a version of its own state, at an offset the C target can check before any
 * kernel runs (an input or a constant: the run function's prologue reads it). */
static void verify_state_node(Graph *g, Node *n) {
  if (!g->prog || n->a.state < 0 || n->a.state >= g->prog->nstates)
    die("verify: %s %%%d names state %d of a program with %d", kiln_ops[n->op].name, n->id, n->a.state,
        g->prog ? g->prog->nstates : 0);
  const StateDecl *d = &g->prog->states[n->a.state];
  if (n->dtype != d->dtype || !shape_eq(&n->shape, &d->shape))
    die("verify: %%%d is %s%s, state %s is %s%s", n->id, dtype_name(n->dtype), shape_str(&n->shape), d->name,
        dtype_name(d->dtype), shape_str(&d->shape));
  if (n->op != OP_WRITE) return;
  Node *v = g->nodes[n->in[0]], *at = g->nodes[n->in[2]];
  if (!is_state_version(v) || v->a.state != n->a.state)
    die("verify: write %%%d updates %%%d, not a version of state %s", n->id, n->in[0], d->name);
  if (at->op != OP_INPUT && at->op != OP_CONST) die("verify: write %%%d has a computed offset %%%d", n->id, at->id);
}

/* Each state's versions form one chain: a version is updated by at most one WRITE, and
 * Graph.state_last names the end of the chain of each state the entry touches. */
static void verify_state_chains(Graph *g) {
  int *next = kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead || n->op != OP_WRITE) continue;
    if (next[n->in[0]]) die("verify: state version %%%d is written twice (%%%d, %%%d)", n->in[0], next[n->in[0]] - 1, i);
    next[n->in[0]] = i + 1;
  }
  for (int s = 0; s < g->nstate_last; s++) {
    int last = g->state_last[s];
    if (last < 0) continue;
    if (last >= g->nnodes || !is_state_version(g->nodes[last]) || g->nodes[last]->a.state != s || next[last])
      die("verify: state_last[%d] = %%%d is not the last version of that state", s, last);
  }
}

/* Node-level invariants: ids, topological inputs, live inputs, shapes as the rule gives them. */
static void verify_node(Graph *g, Node *n, int id) {
  if (n->id != id) die("verify: node at %d has id %d", id, n->id);
  if ((int)n->op < 0 || n->op >= OP__COUNT) die("verify: %%%d has bad op %d", id, (int)n->op);
  const OpInfo *o = &kiln_ops[n->op];
  if (o->family == FAM_LEAF) {
    if (n->nin != 0) die("verify: leaf %%%d has %d inputs", id, n->nin);
    if ((n->op == OP_WEIGHT || n->op == OP_CONST) && !n->data && !(n->op == OP_WEIGHT && n->src))
      die("verify: %s %%%d has no data", o->name, id);
    if (n->op == OP_STATE) verify_state_node(g, n);
    if (n->op == OP_INPUT && (n->io_index < 0 || n->io_index >= g->ninputs || g->inputs[n->io_index].node != id))
      die("verify: input %%%d has io_index %d not matching Graph.inputs", id, n->io_index);
  }
  for (int i = 0; i < n->nin; i++) {
    if (n->in[i] < 0 || n->in[i] >= id) die("verify: %%%d (%s) input %d is %%%d: not topological", id, o->name, i, n->in[i]);
    if (!n->dead && g->nodes[n->in[i]]->dead) die("verify: live %%%d (%s) reads dead %%%d", id, o->name, n->in[i]);
  }
  if (n->dead) return;
  Node copy = *n;
  char err[256];
  if (!shape_infer(g, &copy, err, sizeof err)) die("verify: %%%d no longer passes its shape rule: %s", id, err);
  if (copy.dtype != n->dtype || !shape_eq(&copy.shape, &n->shape))
    die("verify: %%%d (%s) is %s%s but its rule gives %s%s", id, o->name, dtype_name(n->dtype), shape_str(&n->shape),
        dtype_name(copy.dtype), shape_str(&copy.shape));
  if (n->op == OP_WRITE) verify_state_node(g, n);
}

/* The API names: C identifiers, unique across inputs and outputs (they become parameters). */
static void verify_io(Graph *g) {
  int total = g->ninputs + g->noutputs;
  for (int i = 0; i < total; i++) {
    const GraphIO *io = i < g->ninputs ? &g->inputs[i] : &g->outputs[i - g->ninputs];
    const char *what = i < g->ninputs ? "input" : "output";
    if (!is_c_ident(io->name)) die("verify: %s name '%s' is not a C identifier", what, io->name ? io->name : "(null)");
    if (io->node < 0 || io->node >= g->nnodes) die("verify: %s %s names node %d of %d", what, io->name, io->node, g->nnodes);
    if (g->nodes[io->node]->dead) die("verify: %s %s names dead node %%%d", what, io->name, io->node);
    if (i < g->ninputs && g->nodes[io->node]->op != OP_INPUT) die("verify: input %s is a %s", io->name, kiln_ops[g->nodes[io->node]->op].name);
    for (int k = 0; k < i; k++) {
      const GraphIO *o2 = k < g->ninputs ? &g->inputs[k] : &g->outputs[k - g->ninputs];
      if (strcmp(o2->name, io->name) == 0) die("verify: name '%s' used twice among inputs and outputs", io->name);
    }
  }
}

/* Whether the entry writes some state (a side effect, so it is worth running without outputs). */
static bool writes_state(const Graph *g) {
  for (int s = 0; s < g->nstate_last; s++)
    if (g->state_last[s] >= 0 && g->nodes[g->state_last[s]]->op == OP_WRITE) return true;
  return false;
}

/* Contract: the graph is well formed, or Kiln dies naming the broken invariant.
 * Checked: ids equal positions, inputs precede their consumers, no live node reads
 * a dead one, every live node re-infers to its recorded dtype and shape, leaves
 * carry data, io names are unique C identifiers naming live nodes. A model with no
 * outputs is the user's error (reported at the script), unless it writes state. State
 * reads and writes are checked too: their state exists, every version chain is linear. */
void pass_verify(Graph *g) {
  if (g->noutputs == 0 && !writes_state(g)) {
    if (g->prog && g->prog->explicit_entries)
      kiln_error_at((SrcLoc){g->script, 0}, "entry %s declares no outputs and writes no state (call kiln.output)", g->entry);
    kiln_error_at((SrcLoc){g->script, 0}, "the model declares no outputs (call kiln.output)");
  }
  for (int i = 0; i < g->nnodes; i++) verify_node(g, g->nodes[i], i);
  verify_io(g);
  verify_state_chains(g);
}

/* ---- dce ---- */

/* Contract: nodes that no output and no state update depends on become dead, except
 * INPUTs (an unused input stays in the API). The last version of every state an entry
 * writes is a root like an output: writes are the entry's side effects. Afterwards
 * nuses = live consumers + outputs naming it + 1 for a last state version. */
void pass_dce(Graph *g) {
  bool *live = kiln_alloc(sizeof(bool) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->noutputs; i++) live[g->outputs[i].node] = true;
  for (int s = 0; s < g->nstate_last; s++)
    if (g->state_last[s] >= 0 && g->nodes[g->state_last[s]]->op == OP_WRITE) live[g->state_last[s]] = true;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    if (n->op == OP_INPUT) live[i] = true;
    if (!live[i] || n->dead) continue;
    for (int k = 0; k < n->nin; k++) live[n->in[k]] = true;
  }
  for (int i = 0; i < g->nnodes; i++) {
    g->nodes[i]->dead = !live[i];
    g->nodes[i]->nuses = 0;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->nin; k++) g->nodes[n->in[k]]->nuses++;
  }
  for (int i = 0; i < g->noutputs; i++) g->nodes[g->outputs[i].node]->nuses++;
  for (int s = 0; s < g->nstate_last; s++)
    if (g->state_last[s] >= 0 && !g->nodes[g->state_last[s]]->dead) g->nodes[g->state_last[s]]->nuses++;
}

/* ---- cse ---- */

/* True iff every attribute field of a and b is equal (for CSE of identical nodes). */
static bool attrs_eq(const Attrs *a, const Attrs *b) {
  if (a->axis != b->axis || a->axes != b->axes || a->keepdims != b->keepdims) return false;
  if (a->trans_x != b->trans_x || a->trans_y != b->trans_y || a->groups != b->groups || a->count_pad != b->count_pad)
    return false;
  if (memcmp(a->perm, b->perm, sizeof a->perm) || memcmp(a->kernel, b->kernel, sizeof a->kernel)) return false;
  if (memcmp(a->stride, b->stride, sizeof a->stride) || memcmp(a->pad, b->pad, sizeof a->pad)) return false;
  if (memcmp(a->dilation, b->dilation, sizeof a->dilation)) return false;
  if (memcmp(a->start, b->start, sizeof a->start) || memcmp(a->end, b->end, sizeof a->end)) return false;
  if (memcmp(a->step, b->step, sizeof a->step)) return false;
  if (memcmp(&a->eps, &b->eps, sizeof a->eps) || a->to != b->to || a->state != b->state) return false;   /* bits: -0.0 != 0.0 */
  if (a->causal != b->causal || memcmp(&a->scale, &b->scale, sizeof a->scale)) return false;
  if (a->window != b->window || a->ring != b->ring) return false;
  if (a->k != b->k || a->largest != b->largest) return false;
  return a->reshape.rank == b->reshape.rank && memcmp(a->reshape.dim, b->reshape.dim, sizeof a->reshape.dim) == 0;
}

/* Nodes CSE never merges: inputs and weights (replaceable after the build) and state
 * versions (each is a distinct moment of a mutable buffer). */
static bool never_merged(const Node *n) {
  return n->op == OP_INPUT || n->op == OP_WEIGHT || is_state_version(n);
}

/* Two live nodes compute the same value: same op, dtype, shape and either the same
 * inputs and attributes, or (CONST) the same bytes. never_merged nodes never merge. */
static bool same_value(const Node *a, const Node *b) {
  if (a->op != b->op || a->dtype != b->dtype || !shape_eq(&a->shape, &b->shape)) return false;
  if (never_merged(a)) return false;
  if (a->op == OP_CONST) return memcmp(a->data, b->data, (size_t)node_bytes(a)) == 0;
  if (a->nin != b->nin || memcmp(a->in, b->in, sizeof(int) * (size_t)a->nin) != 0) return false;
  return attrs_eq(&a->a, &b->a);
}

/* A hash of what same_value compares, for bucketing only (attrs are left to same_value). */
static uint64_t value_hash(const Node *n) {
  uint64_t h[3 + KILN_MAX_RANK] = {(uint64_t)n->op, (uint64_t)n->dtype, (uint64_t)n->shape.rank};
  for (int i = 0; i < n->shape.rank; i++) h[3 + i] = (uint64_t)n->shape.dim[i];
  uint64_t k = kiln_fnv1a64(h, sizeof h);
  if (n->op == OP_CONST) return k ^ kiln_fnv1a64(n->data, (size_t)node_bytes(n));
  return k ^ kiln_fnv1a64(n->in, sizeof(int) * (size_t)n->nin);
}

/* Contract: of each set of live nodes computing the same value, the first (lowest id)
 * survives; the others become dead and their consumers and outputs are rewired to it.
 * Inputs are rewired before a node is compared, so chains of duplicates merge in one walk. */
void pass_cse(Graph *g) {
  int *rep = kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1));
  size_t cap = 16;
  while (cap < (size_t)g->nnodes * 2) cap *= 2;
  int *table = kiln_alloc(sizeof(int) * cap);   /* open addressing; holds id + 1, 0 = empty */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    rep[i] = i;
    if (n->dead) continue;
    for (int k = 0; k < n->nin; k++) n->in[k] = rep[n->in[k]];
    if (never_merged(n)) continue;
    size_t slot = (size_t)value_hash(n) & (cap - 1);
    for (; table[slot]; slot = (slot + 1) & (cap - 1)) {
      Node *m = g->nodes[table[slot] - 1];
      if (same_value(m, n)) {
        rep[i] = m->id;
        n->dead = true;
        break;
      }
    }
    if (!n->dead) table[slot] = i + 1;
  }
  for (int i = 0; i < g->noutputs; i++) g->outputs[i].node = rep[g->outputs[i].node];
  pass_dce(g);   /* recount nuses over the rewired graph */
}

/* ---- fold ---- */

/* Contract: every live non-leaf node whose inputs are all CONST is evaluated by the
 * reference interpreter and becomes a CONST holding the result, keeping its id, name
 * and loc. WEIGHTs are never folded through (they can be replaced after the build).
 * Walking in id order folds whole constant subgraphs in one pass; the constants they
 * consumed are left for dce2. A data error (gather index out of range) is the user's. */
void pass_fold(Graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || kiln_ops[n->op].family == FAM_LEAF || n->nin == 0) continue;
    bool all_const = true;
    for (int k = 0; k < n->nin; k++) all_const &= g->nodes[n->in[k]]->op == OP_CONST;
    if (!all_const) continue;
    Tensor *in = kiln_alloc(sizeof(Tensor) * (size_t)n->nin);
    for (int k = 0; k < n->nin; k++) {
      Node *c = g->nodes[n->in[k]];
      in[k] = (Tensor){c->dtype, c->shape, c->data};
    }
    Tensor out = {n->dtype, n->shape, kiln_alloc((size_t)node_bytes(n))};
    char err[256];
    if (!interp_node(g, n, in, &out, err, sizeof err)) kiln_error("%s", err);   /* err names the loc */
    n->op = OP_CONST;
    n->nin = 0;
    n->data = out.data;
    n->a = (Attrs){0};
  }
  pass_dce(g);
}

/* ---- pool_act ---- */

/* Contract in kiln.h. A max pool of a tanh or sigmoid (the pool its only reader) becomes
 * the function of the max pool: both functions are non-decreasing and keep a NaN a NaN, so
 * the window's largest input gives its largest output, and the function then runs on a
 * quarter of the values (a 2x2 pool) — LeNet spent a quarter of its time in tanh. The
 * function's node becomes the pool (of its input, with the pool's name, line and
 * attributes) and the pool's node the function, so ids stay in order and every other
 * reader of the pool reads the same node. (The result can differ from the unswapped
 * graph's by an ulp or so where the float approximation of the function is not monotonic
 * between two inputs of a window.) */
void pass_pool_act(Graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    Node *m = g->nodes[i];
    if (m->dead || m->op != OP_MAXPOOL2D) continue;
    Node *t = g->nodes[m->in[0]];
    if (t->dead || (t->op != OP_TANH && t->op != OP_SIGMOID) || t->nuses != 1 || t->dtype != m->dtype) continue;
    bool output = false;
    for (int o = 0; o < g->noutputs; o++) output |= g->outputs[o].node == t->id;
    if (output) continue;
    const OpKind op = t->op;
    const Attrs a = t->a;
    const char *name = t->name;
    const SrcLoc loc = t->loc;
    t->op = m->op, t->a = m->a, t->name = m->name, t->loc = m->loc, t->shape = m->shape;
    m->op = op, m->a = a, m->name = name, m->loc = loc;
  }
}

/* ---- legalize ---- */

/* Appends COPY of node src as output slot i, named after the output. */
static void add_output_copy(Graph *g, int i) {
  Node *src = g->nodes[g->outputs[i].node];
  char err[256];
  int in = src->id;
  Node *c = graph_add(g, OP_COPY, &in, 1, NULL, src->loc, err, sizeof err);
  if (!c) die("legalize: copy of %%%d: %s", in, err);
  c->name = g->outputs[i].name;
  g->outputs[i].node = c->id;
}

/* Contract (memory plan): every graph output's storage root is a kernel result that
 * no other output shares, so the producing kernel can write straight into the
 * caller's output buffer. An output whose root is a leaf or a state version, or whose
 * root an earlier output already claimed (the same node, or views of one value),
 * gets a COPY node appended at the end of the graph. */
void pass_legalize(Graph *g) {
  int *claimed = kiln_alloc(sizeof(int) * (size_t)(g->noutputs + 1));
  for (int i = 0; i < g->noutputs; i++) {
    Node *root = storage_root(g, g->nodes[g->outputs[i].node]);
    bool clash = kiln_ops[root->op].family == FAM_LEAF || root->op == OP_WRITE;   /* state bytes: the caller's */
    for (int k = 0; k < i && !clash; k++) clash = claimed[k] == root->id;
    if (clash) {
      add_output_copy(g, i);
      root = g->nodes[g->outputs[i].node];
    }
    claimed[i] = root->id;
  }
  pass_dce(g);
}

/* ---- group ---- */

/* True iff s is a C keyword, main, or an MSL word (kernel, device, ...): a kernel
 * name either target would reject. */
static bool is_c_keyword(const char *s) {
  static const char *const kw[] = {
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "main",
      "kernel", "device", "constant", "thread", "threadgroup", "half", "bool",
  };
  for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
    if (strcmp(kw[i], s) == 0) return true;
  return false;
}

/* "layers.0.attn.q" -> "layers_0_attn_q"; a leading digit or a keyword gets the op
 * name in front ("0" -> "matmul_0"); no name gives the op name. A write, named after
 * its state, is "<state>_write" ("layers.0.k" -> "layers_0_k_write"). */
static char *kernel_base_name(const Node *n) {
  const char *op = kiln_ops[n->op].name;
  if (!n->name || !*n->name) return kiln_strdup(op);
  char *s = n->op == OP_WRITE ? kiln_fmt("%s_write", n->name) : kiln_strdup(n->name);
  for (char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) *p = '_';
  if ((*s >= '0' && *s <= '9') || is_c_keyword(s)) s = kiln_fmt("%s_%s", op, s);
  return s;
}

/* Kernel names seen so far, an open-addressing hash set in the arena (a linear scan
 * per kernel made naming quadratic). A slot also remembers, for a name used as a
 * base, the next "_<s>" suffix worth trying: every smaller one is already taken and
 * the set only grows, so resuming there picks what a scan from _2 would. */
typedef struct {
  const char *key;
  bool taken;       /* key is a kernel's name */
  int next;         /* as a base: the next suffix to try, 0 = from 2 */
} NameSlot;

typedef struct {
  NameSlot *slot;
  size_t mask;      /* capacity - 1, a power of two over twice the entries */
} NameSet;

/* An empty set sized once for nkernels' names (never grows, so slots stay put). */
static NameSet nameset_new(int nkernels) {
  size_t cap = 16;
  while (cap < (size_t)nkernels * 8 + 16) cap *= 2;   /* three entries a kernel at most */
  return (NameSet){kiln_alloc(sizeof(NameSlot) * cap), cap - 1};
}

/* The slot of s, inserted (untaken, no suffix yet) if absent. FNV-1a. */
static NameSlot *nameset_slot(NameSet *set, const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = s; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (size_t i = (size_t)h & set->mask;; i = (i + 1) & set->mask) {
    NameSlot *e = &set->slot[i];
    if (!e->key) e->key = s;
    if (strcmp(e->key, s) == 0) return e;
  }
}

/* True iff s was marked taken; inserts s untaken if absent. */
static bool name_taken(NameSet *set, const char *s) { return nameset_slot(set, s)->taken; }

/* Which families may anchor a kernel: every family with code. Each of their
 * templates stores every output element exactly once, with its final value, at
 * hook points ($EPILOGUE in templates/) where a chain can be applied. */
static bool can_anchor(const Node *n) {
  OpFamily f = kiln_ops[n->op].family;
  return f != FAM_LEAF && f != FAM_VIEW;
}

/* Which nodes may join a chain ending in t: elementwise ones, a scalar expression each;
 * and a batchnorm of a convolution's result (t the conv anchor, its x), which is a
 * per-output-channel scale and shift of each output: the conv kernel applies it at its
 * store (the C templates once per channel, other targets as a chain step), so the
 * conv's result never makes the round trip through memory. */
static bool can_chain(const Node *n, const Node *t) {
  OpFamily f = kiln_ops[n->op].family;
  if (f == FAM_UNARY || f == FAM_BINARY || f == FAM_SELECT || f == FAM_CAST) return true;
  if (n->op != OP_BATCHNORM || t->op != OP_CONV2D || n->in[0] != t->id) return false;
  for (int k = 1; k < n->nin; k++)
    if (n->in[k] == t->id) return false;
  return true;
}

enum {
  /* Operands a kernel reads, at most: Metal binds 16 buffers (15 read + the output). */
  GROUP_MAX_READS = 15,
};

/* Everything pass_group decides with, computed once. */
typedef struct {
  int *user;           /* per node: its last live consumer, -1 if none */
  bool *is_output;     /* per node: named by a graph output */
  bool *after_write;   /* per node: a WRITE, or computed from one (transitively) */
} Uses;

/* Per node: the highest-id live node reading it (-1 if none), whether a graph output
 * names it, and whether it depends on a state write. Arena arrays; dead nodes count
 * as no reader. */
static Uses uses_of(Graph *g) {
  size_t n1 = (size_t)(g->nnodes + 1);
  Uses u = {kiln_alloc(sizeof(int) * n1), kiln_alloc(sizeof(bool) * n1), kiln_alloc(sizeof(bool) * n1)};
  for (int i = 0; i < g->nnodes; i++) u.user[i] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    u.after_write[i] = n->op == OP_WRITE;
    for (int k = 0; k < n->nin; k++) {
      u.user[n->in[k]] = i;
      u.after_write[i] |= u.after_write[n->in[k]];
    }
  }
  for (int i = 0; i < g->noutputs; i++) u.is_output[g->outputs[i].node] = true;
  return u;
}

/* Does n read an operand straight from the state block (a state version or a view of one)? */
static bool reads_state(Graph *g, const Node *n) {
  for (int k = 0; k < n->nin; k++)
    if (is_state_version(storage_root(g, g->nodes[n->in[k]]))) return true;
  return false;
}

/* Fusion must not move a state read across the write that overwrites it. A kernel runs
 * at one point of the schedule, so a chain node c may join kernel K (reading
 * kernel_reads_state) only if neither of them would drag the other over a write: c's
 * own operands (besides the chain value t) may not come from the state block, and if
 * K reads the state block they may not depend on any write (K reads a version a write
 * may supersede). Conservative: it looks at writes of any state, not only of the ones
 * K reads, which costs a fusion at worst. */
static bool chain_keeps_state_order(Graph *g, const Uses *u, const Node *c, const Node *t, bool kernel_reads_state) {
  for (int k = 0; k < c->nin; k++) {
    if (c->in[k] == t->id) continue;
    if (is_state_version(storage_root(g, g->nodes[c->in[k]]))) return false;
    if (kernel_reads_state && u->after_write[c->in[k]]) return false;
  }
  return true;
}

/* The node a kernel ending in t can absorb next, or NULL. t's value must have no
 * other reader (one use, not an output, not read through a view), the consumer must
 * be elementwise (or a conv's batchnorm: can_chain), not yet in a kernel, of t's
 * shape (t is not broadcast by it: the kernel's loop covers exactly the anchor's
 * output), and keep the operands the kernel reads within GROUP_MAX_READS. Its other operands come from outside the
 * kernel (t's value is its only use inside, so they cannot be kernel nodes) and
 * broadcast to the shape by the consumer's own shape rule. A WRITE ends its kernel (it
 * stores only some rows: a chain has no element to apply to elsewhere), and state
 * order must survive (chain_keeps_state_order). */
static Node *chain_next(Graph *g, const Uses *u, const Node *t, int *nreads, bool kernel_reads_state) {
  if (t->nuses != 1 || u->is_output[t->id] || u->user[t->id] < 0 || t->op == OP_WRITE) return NULL;
  Node *c = g->nodes[u->user[t->id]];
  if (!can_chain(c, t) || c->kernel >= 0 || !shape_eq(&c->shape, &t->shape)) return NULL;
  if (!chain_keeps_state_order(g, u, c, t, kernel_reads_state)) return NULL;
  int reads = *nreads + c->nin - 1;
  if (reads > GROUP_MAX_READS) return NULL;
  *nreads = reads;
  return c;
}

/* Collects the kernel anchored at a: a, then as long a chain as chain_next allows,
 * cut back to its last node of a's dtype (templates may accumulate in the output
 * buffer, so a kernel's result has its anchor's type; a comparison feeding a
 * `where` is fine inside a chain). Returns the node count; nodes[] gets the ids. */
static int collect_chain(Graph *g, const Uses *u, Node *a, int *nodes) {
  int n = 0, keep = 1, nreads = a->nin;
  nodes[n++] = a->id;
  if (g->no_fuse) return 1;
  bool state_read = reads_state(g, a);
  for (Node *t = a, *c; (c = chain_next(g, u, t, &nreads, state_read)); t = c) {
    nodes[n++] = c->id;
    c->kernel = 0;   /* claimed while collecting; the caller sets the real index */
    if (c->dtype == a->dtype) keep = n;
  }
  for (int i = keep; i < n; i++) g->nodes[nodes[i]]->kernel = -1;
  return keep;
}

/* qsort order on Kernels: by the id of each kernel's result (last) node. */
static int by_result(const void *pa, const void *pb) {
  const Kernel *a = pa, *b = pb;
  return a->nodes[a->nnodes - 1] - b->nodes[b->nnodes - 1];
}

/* Kernel.cname for every kernel in index order, from its anchor; in a program with
 * named entries, after the entry ("decode_layers_0_attention_wq"): the entries' kernels
 * share one C file. */
static void name_kernels(Graph *g) {
  NameSet set = nameset_new(g->nkernels);
  bool prefixed = g->prog && g->prog->explicit_entries && g->entry;
  for (int k = 0; k < g->nkernels; k++) {
    const Node *n = g->nodes[g->kernels[k].nodes[0]];
    char *base = kernel_base_name(n), *name = base;
    if (prefixed) name = base = kiln_fmt("%s_%s", g->entry, base);
    if (name_taken(&set, name) && n->name && *n->name) name = base = kiln_fmt("%s_%s", base, kiln_ops[n->op].name);
    if (name_taken(&set, name)) {
      NameSlot *b = nameset_slot(&set, base);
      int s = b->next ? b->next : 2;
      while (name_taken(&set, name = kiln_fmt("%s_%d", base, s))) s++;
      b->next = s + 1;   /* slots never move: the table is sized once */
    }
    nameset_slot(&set, name)->taken = true;
    g->kernels[k].cname = name;
  }
}

/* True iff KILN_NOFUSE is set, non-empty and not "0". */
static bool fusion_disabled(void) {
  const char *e = getenv("KILN_NOFUSE");
  return e && *e && strcmp(e, "0") != 0;
}

/* Contract: every live non-leaf node except RESHAPE (a view, no code) is in exactly
 * one kernel. Nodes are taken in id order; a node not yet in a kernel anchors one
 * and absorbs the chain of elementwise nodes that collect_chain allows (fusion:
 * matmul + bias add + relu, conv + batchnorm + relu, add + relu, gelu's pieces ...), so a
 * kernel's intermediate values never reach memory. Graph.no_fuse or a non-empty
 * KILN_NOFUSE other than "0" keeps one node per kernel. Kernels are ordered by their
 * result's id — topological, since everything a kernel reads from outside is an
 * earlier kernel's result — and Node.kernel is set (-1 for leaves and views).
 * Kernel.cname is unique, from the anchor: the sanitised node name, then
 * name_<op>, then name_<op>_2, _3...; with no name the op name, then <op>_2, _3...
 * Kernel.order is the index (pass_schedule confirms it). */
void pass_group(Graph *g) {
  if (fusion_disabled()) g->no_fuse = true;
  g->kernels = kiln_alloc(sizeof(Kernel) * (size_t)(g->nnodes + 1));
  g->nkernels = 0;
  for (int i = 0; i < g->nnodes; i++) g->nodes[i]->kernel = -1;
  Uses u = uses_of(g);
  int *scratch = kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead || n->kernel >= 0 || !can_anchor(n)) continue;
    Kernel *k = &g->kernels[g->nkernels++];
    k->nnodes = collect_chain(g, &u, n, scratch);
    k->nodes = kiln_alloc(sizeof(int) * (size_t)k->nnodes);
    memcpy(k->nodes, scratch, sizeof(int) * (size_t)k->nnodes);
    for (int j = 0; j < k->nnodes; j++) g->nodes[k->nodes[j]]->kernel = 0;
  }
  qsort(g->kernels, (size_t)g->nkernels, sizeof(Kernel), by_result);
  for (int k = 0; k < g->nkernels; k++) {
    g->kernels[k].order = k;
    for (int j = 0; j < g->kernels[k].nnodes; j++) g->nodes[g->kernels[k].nodes[j]]->kernel = k;
  }
  name_kernels(g);
}

/* ---- schedule ---- */

/* "Must run before" edges between kernels, as compressed rows: the successors of
 * kernel k are succ[first[k] .. first[k + 1]). */
typedef struct {
  int nk;
  int *first, *succ, *indeg;
} KernelDeps;

/* A growable array of (from, to) kernel pairs in the arena. */
typedef struct {
  int *v;
  int n, cap;
} Pairs;

static void pairs_add(Pairs *p, int from, int to) {
  if (p->n + 2 > p->cap) {
    int cap = p->cap ? 2 * p->cap : 256;
    int *v = kiln_alloc(sizeof(int) * (size_t)cap);
    if (p->n) memcpy(v, p->v, sizeof(int) * (size_t)p->n);
    p->v = v;
    p->cap = cap;
  }
  p->v[p->n++] = from;
  p->v[p->n++] = to;
}

/* The kernels that read each state version straight from the state block: per version
 * node id a list of kernel indices (duplicates possible), as head/next chains. */
typedef struct {
  int *head, *next, *kernel;   /* head[node] -> entry; entries chain through next */
  int n;
} Readers;

/* Every kernel's reads of a state version (its own nodes' operands whose storage root
 * is a STATE or WRITE node), recorded per version. */
static Readers state_readers(Graph *g) {
  int cap = 1;
  for (int k = 0; k < g->nkernels; k++)
    for (int j = 0; j < g->kernels[k].nnodes; j++) cap += g->nodes[g->kernels[k].nodes[j]]->nin;
  Readers r = {kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1)), kiln_alloc(sizeof(int) * (size_t)cap),
               kiln_alloc(sizeof(int) * (size_t)cap), 0};
  for (int i = 0; i < g->nnodes; i++) r.head[i] = -1;
  for (int k = 0; k < g->nkernels; k++)
    for (int j = 0; j < g->kernels[k].nnodes; j++) {
      const Node *n = g->nodes[g->kernels[k].nodes[j]];
      for (int i = 0; i < n->nin; i++) {
        const Node *v = storage_root(g, g->nodes[n->in[i]]);
        if (!is_state_version(v)) continue;
        r.kernel[r.n] = k;
        r.next[r.n] = r.head[v->id];
        r.head[v->id] = r.n++;
      }
    }
  return r;
}

/* Data edges (a kernel after the kernels whose results it reads, through views) and
 * state edges (a WRITE of version v after every other kernel reading v from the state
 * block: those reads must see v before the write replaces it in place). */
static KernelDeps kernel_deps(Graph *g, const Readers *rd) {
  Pairs p = {0};
  for (int k = 0; k < g->nkernels; k++)
    for (int j = 0; j < g->kernels[k].nnodes; j++) {
      const Node *n = g->nodes[g->kernels[k].nodes[j]];
      for (int i = 0; i < n->nin; i++) {
        const Node *src = storage_root(g, g->nodes[n->in[i]]);
        if (src->kernel >= 0 && src->kernel != k) pairs_add(&p, src->kernel, k);
      }
      if (n->op != OP_WRITE) continue;
      for (int e = rd->head[n->in[0]]; e >= 0; e = rd->next[e])
        if (rd->kernel[e] != k) pairs_add(&p, rd->kernel[e], k);
    }
  KernelDeps d = {g->nkernels, kiln_alloc(sizeof(int) * (size_t)(g->nkernels + 2)),
                  kiln_alloc(sizeof(int) * (size_t)(p.n / 2 + 1)), kiln_alloc(sizeof(int) * (size_t)(g->nkernels + 1))};
  for (int e = 0; e < p.n; e += 2) d.first[p.v[e] + 1]++, d.indeg[p.v[e + 1]]++;
  for (int k = 0; k < g->nkernels; k++) d.first[k + 1] += d.first[k];
  int *fill = kiln_alloc(sizeof(int) * (size_t)(g->nkernels + 1));
  for (int e = 0; e < p.n; e += 2) d.succ[d.first[p.v[e]] + fill[p.v[e]]++] = p.v[e + 1];
  return d;
}

/* A binary min-heap of kernel indices. */
typedef struct {
  int *v;
  int n;
} Heap;

static void heap_push(Heap *h, int x) {
  int i = h->n++;
  for (; i > 0 && h->v[(i - 1) / 2] > x; i = (i - 1) / 2) h->v[i] = h->v[(i - 1) / 2];
  h->v[i] = x;
}

static int heap_pop(Heap *h) {
  int top = h->v[0], x = h->v[--h->n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->v[c + 1] < h->v[c]) c++;
    if (h->v[c] >= x) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = x;
  return top;
}

/* No order exists: some kernel reads a state version and also (through other values)
 * needs the write that replaces it. The user's error, at the first such read. */
static _Noreturn void report_state_cycle(Graph *g, const Readers *rd, const bool *placed) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *w = g->nodes[i];
    if (w->dead || w->op != OP_WRITE || placed[w->kernel]) continue;
    for (int e = rd->head[w->in[0]]; e >= 0; e = rd->next[e]) {
      const Kernel *kr = &g->kernels[rd->kernel[e]];
      if (rd->kernel[e] == w->kernel || placed[rd->kernel[e]]) continue;
      const Node *r = g->nodes[kr->nodes[0]];
      const char *name = g->prog ? g->prog->states[w->a.state].name : "?";
      kiln_error_at(r->loc, "%s reads state %s as it was before the kiln.write at %s:%d, but also needs that write's "
                    "result; keep a copy of the old value made before the write (e.g. local old = state * 1)",
                    kiln_ops[r->op].name, name, w->loc.file ? w->loc.file : "?", w->loc.line);
    }
  }
  die("schedule: the kernel graph of entry %s has a cycle not caused by a state read", g->entry ? g->entry : "?");
}

/* Contract: Graph.kernels in a deterministic topological order of the data and state
 * edges (kernel_deps), Kernel.order = index, Node.kernel updated. Among the kernels
 * ready to run, the one pass_group put first (by result id) runs first, so a graph
 * without state keeps pass_group's order exactly; a read of a state version moves
 * ahead of the write that overwrites it even when it was traced after the write. A
 * read that also depends on that write is the user's error (report_state_cycle). */
void pass_schedule(Graph *g) {
  Readers rd = state_readers(g);
  KernelDeps d = kernel_deps(g, &rd);
  Heap h = {kiln_alloc(sizeof(int) * (size_t)(g->nkernels + 1)), 0};
  int *order = kiln_alloc(sizeof(int) * (size_t)(g->nkernels + 1)), n = 0;
  bool *placed = kiln_alloc(sizeof(bool) * (size_t)(g->nkernels + 1));
  for (int k = 0; k < g->nkernels; k++)
    if (!d.indeg[k]) heap_push(&h, k);
  while (h.n) {
    int k = heap_pop(&h);
    order[n++] = k;
    placed[k] = true;
    for (int e = d.first[k]; e < d.first[k + 1]; e++)
      if (--d.indeg[d.succ[e]] == 0) heap_push(&h, d.succ[e]);
  }
  if (n < g->nkernels) report_state_cycle(g, &rd, placed);
  Kernel *ks = kiln_alloc(sizeof(Kernel) * (size_t)(g->nkernels + 1));
  for (int i = 0; i < n; i++) {
    ks[i] = g->kernels[order[i]];
    ks[i].order = i;
    for (int j = 0; j < ks[i].nnodes; j++) g->nodes[ks[i].nodes[j]]->kernel = i;
  }
  if (n) memcpy(g->kernels, ks, sizeof(Kernel) * (size_t)n);
}
