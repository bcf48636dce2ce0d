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

/* Node-level invariants: ids, topological inputs, live inputs, shapes as the rule gives them. */
static void verify_node(Graph *g, Node *n, int id) {
  if (n->id != id) die("verify: node at %d has id %d", id, n->id);
  if ((int)n->op < 0 || n->op >= OP__COUNT) die("verify: %%%d has bad op %d", id, (int)n->op);
  const OpInfo *o = &kiln_ops[n->op];
  if (o->family == FAM_LEAF) {
    if (n->nin != 0) die("verify: leaf %%%d has %d inputs", id, n->nin);
    if ((n->op == OP_WEIGHT || n->op == OP_CONST) && !n->data) die("verify: %s %%%d has no data", o->name, id);
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

/* Contract: the graph is well formed, or Kiln dies naming the broken invariant.
 * Checked: ids equal positions, inputs precede their consumers, no live node reads
 * a dead one, every live node re-infers to its recorded dtype and shape, leaves
 * carry data, io names are unique C identifiers naming live nodes. A model with no
 * outputs is the user's error (reported at the script). */
void pass_verify(Graph *g) {
  if (g->noutputs == 0) kiln_error_at((SrcLoc){g->script, 0}, "the model declares no outputs (call kiln.output)");
  for (int i = 0; i < g->nnodes; i++) verify_node(g, g->nodes[i], i);
  verify_io(g);
}

/* ---- dce ---- */

/* Contract: nodes that no output depends on become dead, except INPUTs (an unused
 * input stays in the API). Afterwards nuses = live consumers + outputs naming it. */
void pass_dce(Graph *g) {
  bool *live = kiln_alloc(sizeof(bool) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->noutputs; i++) live[g->outputs[i].node] = true;
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
  if (memcmp(&a->eps, &b->eps, sizeof a->eps) || a->to != b->to) return false;   /* bits: -0.0 != 0.0 */
  if (a->causal != b->causal || memcmp(&a->scale, &b->scale, sizeof a->scale)) return false;
  return a->reshape.rank == b->reshape.rank && memcmp(a->reshape.dim, b->reshape.dim, sizeof a->reshape.dim) == 0;
}

/* Two live nodes compute the same value: same op, dtype, shape and either the same
 * inputs and attributes, or (CONST) the same bytes. INPUT and WEIGHT never merge. */
static bool same_value(const Node *a, const Node *b) {
  if (a->op != b->op || a->dtype != b->dtype || !shape_eq(&a->shape, &b->shape)) return false;
  if (a->op == OP_INPUT || a->op == OP_WEIGHT) return false;
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
    if (n->op == OP_INPUT || n->op == OP_WEIGHT) continue;
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
 * caller's output buffer. An output whose root is an INPUT, WEIGHT or CONST, or whose
 * root an earlier output already claimed (the same node, or views of one value),
 * gets a COPY node appended at the end of the graph. */
void pass_legalize(Graph *g) {
  int *claimed = kiln_alloc(sizeof(int) * (size_t)(g->noutputs + 1));
  for (int i = 0; i < g->noutputs; i++) {
    Node *root = storage_root(g, g->nodes[g->outputs[i].node]);
    bool clash = kiln_ops[root->op].family == FAM_LEAF;
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
 * name in front ("0" -> "matmul_0"); no name gives the op name. */
static char *kernel_base_name(const Node *n) {
  const char *op = kiln_ops[n->op].name;
  if (!n->name || !*n->name) return kiln_strdup(op);
  char *s = kiln_strdup(n->name);
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

/* Which families may join a chain: elementwise ones, a scalar expression each. */
static bool can_chain(const Node *n) {
  OpFamily f = kiln_ops[n->op].family;
  return f == FAM_UNARY || f == FAM_BINARY || f == FAM_SELECT || f == FAM_CAST;
}

enum {
  /* Operands a kernel reads, at most: Metal binds 16 buffers (15 read + the output). */
  GROUP_MAX_READS = 15,
};

/* Everything pass_group decides with, computed once. */
typedef struct {
  int *user;           /* per node: its last live consumer, -1 if none */
  bool *is_output;     /* per node: named by a graph output */
} Uses;

/* Per node: the highest-id live node reading it (-1 if none) and whether a graph
 * output names it. Arena arrays; dead nodes count as no reader. */
static Uses uses_of(Graph *g) {
  Uses u = {kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1)), kiln_alloc(sizeof(bool) * (size_t)(g->nnodes + 1))};
  for (int i = 0; i < g->nnodes; i++) u.user[i] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->nin; k++) u.user[n->in[k]] = i;
  }
  for (int i = 0; i < g->noutputs; i++) u.is_output[g->outputs[i].node] = true;
  return u;
}

/* The node a kernel ending in t can absorb next, or NULL. t's value must have no
 * other reader (one use, not an output, not read through a view), the consumer must
 * be elementwise, not yet in a kernel, of t's shape (t is not broadcast by it: the
 * kernel's loop covers exactly the anchor's output), and keep the operands the
 * kernel reads within GROUP_MAX_READS. Its other operands come from outside the
 * kernel (t's value is its only use inside, so they cannot be kernel nodes) and
 * broadcast to the shape by the consumer's own shape rule. */
static Node *chain_next(Graph *g, const Uses *u, const Node *t, int *nreads) {
  if (t->nuses != 1 || u->is_output[t->id] || u->user[t->id] < 0) return NULL;
  Node *c = g->nodes[u->user[t->id]];
  if (!can_chain(c) || c->kernel >= 0 || !shape_eq(&c->shape, &t->shape)) return NULL;
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
  for (Node *t = a, *c; (c = chain_next(g, u, t, &nreads)); t = c) {
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

/* Kernel.cname for every kernel in index order, from its anchor. */
static void name_kernels(Graph *g) {
  NameSet set = nameset_new(g->nkernels);
  for (int k = 0; k < g->nkernels; k++) {
    const Node *n = g->nodes[g->kernels[k].nodes[0]];
    char *base = kernel_base_name(n), *name = base;
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
 * matmul + bias add + relu, batchnorm + relu, add + relu, gelu's pieces ...), so a
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

/* Contract: Graph.kernels in a deterministic topological order, Kernel.order = index,
 * Node.kernel updated. The order is pass_group's (kernels by their result's id),
 * topological because the graph is and a kernel reads only earlier kernels' results;
 * a memory-aware order can replace it here without touching anything else.
 * Dies if a kernel would run before a kernel it reads from. */
void pass_schedule(Graph *g) {
  for (int k = 0; k < g->nkernels; k++) g->kernels[k].order = k;
  for (int k = 0; k < g->nkernels; k++) {
    const Kernel *kr = &g->kernels[k];
    for (int j = 0; j < kr->nnodes; j++) {
      const Node *n = g->nodes[kr->nodes[j]];
      if (n->kernel != k) die("schedule: %%%d says kernel %d, sits in %d", n->id, n->kernel, k);
      for (int i = 0; i < n->nin; i++) {
        const Node *src = storage_root(g, g->nodes[n->in[i]]);
        if (src->kernel > k) die("schedule: kernel %s reads %%%d of later kernel %d", kr->cname, src->id, src->kernel);
      }
    }
  }
}
