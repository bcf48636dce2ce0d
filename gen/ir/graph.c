/*
 * graph.c — building the graph and printing it.
 *
 * A Graph is an array of Nodes in topological order: a node can only name inputs
 * that already exist, so the order in which the frontend adds nodes is a valid
 * evaluation order and node ids never change (passes mark nodes dead instead of
 * removing them). graph_add runs the op's shape rule (shape.c) before the node
 * joins the graph, so a graph never holds a node whose shape is wrong.
 *
 * The text dump is the form golden tests pin: one node a line, stable, no
 * pointers, dead nodes left out, placement shown once the passes have set it:
 *   %5 = matmul %3, %4 trans_y : f32[1, 512]  fc1  @models/mlp.lua:7  [k3 fc1 arena+128]
 */
#include "kiln.h"

#include <string.h>

/* An empty graph in the arena. model names the generated code ("model" when NULL); script,
 * the Lua path, is kept so graph_src_name can print locations relative to it. */
Graph *graph_new(const char *model, const char *script) {
  Graph *g = kiln_alloc(sizeof *g);
  g->model = model ? kiln_strdup(model) : "model";
  g->script = script ? kiln_strdup(script) : NULL;
  return g;
}

/* file as it should appear in messages and generated code: relative to the script's directory
 * when it lies under it, else unchanged; "?" for NULL. Never absolute for files beside the script. */
const char *graph_src_name(const Graph *g, const char *file) {
  if (!file) return "?";
  const char *slash = g->script ? strrchr(g->script, '/') : NULL;
  if (!slash) return file;
  size_t dir = (size_t)(slash - g->script) + 1;
  return strncmp(file, g->script, dir) == 0 ? file + dir : file;
}

/* ---- programs ---- */

/* An empty program: no entries, no states. */
Program *program_new(const char *model, const char *script) {
  Program *p = kiln_alloc(sizeof *p);
  p->model = model ? kiln_strdup(model) : "model";
  p->script = script ? kiln_strdup(script) : NULL;
  return p;
}

/* Contract in kiln.h. Entries keep their declaration order (it is the order of the
 * generated functions and of every listing). */
Graph *program_add_entry(Program *p, const char *entry) {
  Graph *g = graph_new(p->model, p->script);
  g->entry = kiln_strdup(entry);
  g->prog = p;
  Graph **e = kiln_alloc(sizeof(Graph *) * (size_t)(p->nentries + 1));
  if (p->nentries) memcpy(e, p->entries, sizeof(Graph *) * (size_t)p->nentries);
  e[p->nentries++] = g;
  p->entries = e;
  return g;
}

/* A program Kiln emits exactly as a model without state always was: one implicit entry. */
bool program_is_plain(const Program *p) { return !p->explicit_entries && p->nstates == 0 && p->nentries == 1; }

/* Contract in kiln.h; states declared after the graph last recorded one are untouched. */
int graph_state_last(const Graph *g, int s) { return s >= 0 && s < g->nstate_last ? g->state_last[s] : -1; }

/* Records node as the value of state s at the end of the entry (growing the table). */
void graph_set_state_last(Graph *g, int s, int node) {
  if (s < 0) die("graph_set_state_last: state %d", s);
  if (s >= g->nstate_last) {
    int *v = kiln_alloc(sizeof(int) * (size_t)(s + 1));
    for (int i = 0; i <= s; i++) v[i] = i < g->nstate_last ? g->state_last[i] : -1;
    g->state_last = v;
    g->nstate_last = s + 1;
  }
  g->state_last[s] = node;
}

/* Appends n to g->nodes, growing the array (arena memory: the old copy is simply left). */
static void graph_push(Graph *g, Node *n) {
  if (g->nnodes == g->capnodes) {
    int cap = g->capnodes ? g->capnodes * 2 : 64;
    Node **nodes = kiln_alloc(sizeof(Node *) * (size_t)cap);
    if (g->nnodes) memcpy(nodes, g->nodes, sizeof(Node *) * (size_t)g->nnodes);
    g->nodes = nodes;
    g->capnodes = cap;
  }
  n->id = g->nnodes;
  g->nodes[g->nnodes++] = n;
}

/* A fresh node with the fields every node shares; not yet in the graph. */
static Node *node_new(OpKind op, SrcLoc loc) {
  Node *n = kiln_alloc(sizeof *n);
  n->op = op;
  n->loc = loc;
  n->kernel = -1;
  n->io_index = -1;
  n->io_slot = -1;
  return n;
}

/* Appends a non-leaf node (op, inputs, attrs copied) after shape_infer sets its dtype and shape.
 * Returns NULL with a user message in err when inference fails (nothing is added);
 * dies on a leaf op or an input id that is not an earlier node: the graph stays topological. */
Node *graph_add(Graph *g, OpKind op, const int *in, int nin, const Attrs *a, SrcLoc loc, char *err,
                size_t errlen) {
  if ((int)op < 0 || op >= OP__COUNT) die("graph_add: bad op %d", (int)op);
  if (kiln_ops[op].family == FAM_LEAF) die("graph_add: %s is a leaf, use graph_leaf", kiln_ops[op].name);
  if (nin < 0) die("graph_add: %s with %d inputs", kiln_ops[op].name, nin);
  for (int i = 0; i < nin; i++)
    if (in[i] < 0 || in[i] >= g->nnodes) die("graph_add: %s input %d is node %d of %d", kiln_ops[op].name, i, in[i], g->nnodes);
  Node *n = node_new(op, loc);
  n->nin = nin;
  n->in = kiln_alloc(sizeof(int) * (size_t)(nin ? nin : 1));
  if (nin) memcpy(n->in, in, sizeof(int) * (size_t)nin);
  if (a) n->a = *a;
  if (!shape_infer(g, n, err, errlen)) return NULL;
  graph_push(g, n);
  return n;
}

/* v (n entries, *cap allocated) with room for one more: the same array, or a copy of
 * twice the size in the arena (the old one stays there until exit). */
static GraphIO *io_append(GraphIO *v, int n, int *cap) {
  if (n < *cap) return v;
  *cap = *cap ? 2 * *cap : 8;
  GraphIO *w = kiln_alloc(sizeof(GraphIO) * (size_t)*cap);
  if (n) memcpy(w, v, sizeof(GraphIO) * (size_t)n);
  return w;
}

/* Appends an INPUT/WEIGHT/CONST leaf with the given dtype, shape and (copied) name; an INPUT
 * is also registered in g->inputs, in call order. No shape checks here; dies on a non-leaf or bad rank. */
Node *graph_leaf(Graph *g, OpKind op, DType t, const Shape *s, const char *name, SrcLoc loc) {
  if (kiln_ops[op].family != FAM_LEAF) die("graph_leaf: %s is not a leaf", kiln_ops[op].name);
  if (s->rank < 0 || s->rank > KILN_MAX_RANK) die("graph_leaf: rank %d", s->rank);
  Node *n = node_new(op, loc);
  n->dtype = t;
  n->shape = *s;
  n->name = name ? kiln_strdup(name) : NULL;
  n->in = kiln_alloc(sizeof(int));
  graph_push(g, n);
  if (op == OP_INPUT) {
    GraphIO *io = io_append(g->inputs, g->ninputs, &g->capinputs);
    io[g->ninputs] = (GraphIO){n->name ? n->name : "input", n->id};
    n->io_index = g->ninputs;
    g->inputs = io;
    g->ninputs++;
  }
  return n;
}

/* Registers node as a model output under a copy of name, after the earlier ones; dies on a bad id. */
void graph_output(Graph *g, const char *name, int node) {
  if (node < 0 || node >= g->nnodes) die("graph_output: node %d of %d", node, g->nnodes);
  GraphIO *io = io_append(g->outputs, g->noutputs, &g->capoutputs);
  io[g->noutputs] = (GraphIO){kiln_strdup(name), node};
  g->outputs = io;
  g->noutputs++;
}

/* Contract in kiln.h. */
void graph_move_before(Graph *g, int n0, const int *host) {
  int n = g->nnodes, at = 0, j = 0;
  Node **order = kiln_alloc(sizeof(Node *) * (size_t)n);
  int *to = kiln_alloc(sizeof(int) * (size_t)n);   /* old id -> new id */
  for (int i = 0; i < n0; i++) {
    for (; j < n - n0 && host[j] == i; j++) order[at] = g->nodes[n0 + j], to[n0 + j] = at++;
    order[at] = g->nodes[i], to[i] = at++;
  }
  if (j != n - n0) die("graph_move_before: a node's host is not an earlier node");
  for (int i = 0; i < n; i++) {
    Node *x = order[i];
    x->id = i;
    for (int k = 0; k < x->nin; k++) {
      x->in[k] = to[x->in[k]];
      if (x->in[k] >= i) die("graph_move_before: node %d would read node %d after it", i, x->in[k]);
    }
    g->nodes[i] = x;
  }
  for (int i = 0; i < g->ninputs; i++) g->inputs[i].node = to[g->inputs[i].node];
  for (int i = 0; i < g->noutputs; i++) g->outputs[i].node = to[g->outputs[i].node];
  for (int s = 0; s < g->nstate_last; s++)
    if (g->state_last[s] >= 0) g->state_last[s] = to[g->state_last[s]];
}

/* Contract in kiln.h. In place, with no copy of the node array or an id map: pass_narrow
 * calls it once a rewrite, and those copies grew with the square of a long chain. */
void graph_move_all_before(Graph *g, int n0, int at) {
  const int n = g->nnodes, k = n - n0;
  Node **moved = kiln_alloc(sizeof(Node *) * (size_t)k);
  memcpy(moved, g->nodes + n0, sizeof(Node *) * (size_t)k);
  memmove(g->nodes + at + k, g->nodes + at, sizeof(Node *) * (size_t)(n0 - at));
  memcpy(g->nodes + at, moved, sizeof(Node *) * (size_t)k);
#define NEW_ID(id) ((id) >= n0 ? (id) - n0 + at : (id) >= at ? (id) + k : (id))
  for (int i = at; i < n; i++) {   /* nodes before at read only nodes before at */
    Node *x = g->nodes[i];
    x->id = i;
    for (int j = 0; j < x->nin; j++) x->in[j] = NEW_ID(x->in[j]);
  }
  for (int i = 0; i < g->ninputs; i++) g->inputs[i].node = NEW_ID(g->inputs[i].node);
  for (int i = 0; i < g->noutputs; i++) g->outputs[i].node = NEW_ID(g->outputs[i].node);
  for (int i = 0; i < g->nstate_last; i++)
    if (g->state_last[i] >= 0) g->state_last[i] = NEW_ID(g->state_last[i]);
#undef NEW_ID
}

/* The node with this id; dies on an out-of-range id, which is always a Kiln bug. */
Node *graph_node(Graph *g, int id) {
  if (id < 0 || id >= g->nnodes) die("graph_node: id %d of %d", id, g->nnodes);
  return g->nodes[id];
}

/* Element count and byte size of a node's value (shape already checked, so no overflow). */
int64_t node_numel(const Node *n) { return shape_numel(&n->shape); }
int64_t node_bytes(const Node *n) { return node_numel(n) * dtype_size(n->dtype); }

/* ---- text dump ---- */

/* "[0, 2, 1]" for the first n ints. */
static void put_ints(Buf *b, const int *v, int n) {
  buf_puts(b, "[");
  for (int i = 0; i < n; i++) buf_printf(b, "%s%d", i ? ", " : "", v[i]);
  buf_puts(b, "]");
}

/* The attributes an op reads, in a fixed order; nothing for ops without any. */
static void put_attrs(Buf *b, const Node *n) {
  const Attrs *a = &n->a;
  switch (kiln_ops[n->op].family) {
  case FAM_MATMUL:
    if (a->trans_x) buf_puts(b, " trans_x");
    if (a->trans_y) buf_puts(b, " trans_y");
    break;
  case FAM_CONV:
  case FAM_CONV_TRANSPOSE:
    buf_puts(b, " stride ");
    put_ints(b, a->stride, 2);
    buf_puts(b, " pad ");
    put_ints(b, a->pad, 4);
    buf_puts(b, " dilation ");
    put_ints(b, a->dilation, 2);
    buf_printf(b, " groups %d", a->groups);
    break;
  case FAM_POOL:
    buf_puts(b, " kernel ");
    put_ints(b, a->kernel, 2);
    buf_puts(b, " stride ");
    put_ints(b, a->stride, 2);
    buf_puts(b, " pad ");
    put_ints(b, a->pad, 4);
    if (n->op == OP_AVGPOOL2D && a->count_pad) buf_puts(b, " count_pad");
    break;
  case FAM_REDUCE: {
    buf_puts(b, " axes [");
    int k = 0;
    for (int i = 0; i < 32; i++)
      if (a->axes & (1u << i)) buf_printf(b, "%s%d", k++ ? ", " : "", i);
    buf_puts(b, "]");
    if (a->keepdims) buf_puts(b, " keepdims");
    break;
  }
  case FAM_GATHER_ELEMENTS:
  case FAM_SCATTER:
    buf_printf(b, " axis %d", a->axis);
    break;
  case FAM_TOPK:
    buf_printf(b, " axis %d k %d %s", a->axis, a->k, a->largest ? "largest" : "smallest");
    break;
  case FAM_ARGREDUCE:
    buf_printf(b, " axis %d%s", a->axis, a->keepdims ? " keepdims" : "");
    break;
  case FAM_SOFTMAX:
  case FAM_CONCAT:
  case FAM_GATHER:
  case FAM_WRITE:
    buf_printf(b, " axis %d%s", a->axis, n->op == OP_WRITE && a->ring ? " ring" : "");
    break;
  case FAM_NORM:
    buf_printf(b, " axis %d eps %g", a->axis, (double)a->eps);
    break;
  case FAM_BATCHNORM:
    buf_printf(b, " eps %g", (double)a->eps);
    break;
  case FAM_ATTENTION:
    buf_printf(b, " scale %g%s", (double)a->scale, a->causal ? " causal" : "");
    if (a->window) buf_printf(b, " window %d", a->window);
    break;
  case FAM_TRANSPOSE:
    buf_puts(b, " perm ");
    put_ints(b, a->perm, n->shape.rank);
    break;
  case FAM_SLICE:
    buf_puts(b, " [");
    for (int i = 0; i < n->shape.rank; i++)
      buf_printf(b, "%s%lld:%lld:%lld", i ? ", " : "", (long long)a->start[i], (long long)a->end[i],
                 (long long)a->step[i]);
    buf_puts(b, "]");
    break;
  default:
    break;
  }
}

/* Up to 8 values of a CONST, so folded results can be read in the dump. */
static void put_const_values(Buf *b, const Node *n) {
  if (!n->data) return;
  int64_t count = node_numel(n), show = count < 8 ? count : 8;
  buf_puts(b, " {");
  for (int64_t i = 0; i < show; i++) {
    if (i) buf_puts(b, ", ");
    if (n->dtype == DT_F32) buf_printf(b, "%.9g", (double)((const float *)n->data)[i]);
    else if (n->dtype == DT_I32) buf_printf(b, "%d", ((const int32_t *)n->data)[i]);
    else buf_printf(b, "%d", ((const uint8_t *)n->data)[i]);
  }
  if (count > show) buf_printf(b, ", ... %lld more", (long long)(count - show));
  buf_puts(b, "}");
}

/* The dump's spelling of a memory region ("arena", "weights", ...). */
static const char *region_name(Region r) {
  switch (r) {
  case REG_NONE: return "none";
  case REG_WEIGHTS: return "weights";
  case REG_ARENA: return "arena";
  case REG_INPUT: return "input";
  case REG_OUTPUT: return "output";
  case REG_STATE: return "state";
  }
  return "?";
}

/* "[k3 fc1 arena+128]" once grouping or memory planning has run; a packed weight adds
 * "panels32" ("panels32^T" when packed from its transpose), a weight in a stored format
 * its name ("q4_k"). */
static void put_placement(Buf *b, const Graph *g, const Node *n) {
  bool has_kernel = n->kernel >= 0 && n->kernel < g->nkernels;
  bool stored = n->op == OP_WEIGHT && n->wfmt != WF_F32;
  if (!has_kernel && n->region == REG_NONE && !n->pack && !stored) return;
  buf_puts(b, "  [");
  if (has_kernel) buf_printf(b, "k%d %s", n->kernel, g->kernels[n->kernel].cname);
  else if (n->op == OP_RESHAPE) buf_puts(b, "view");
  if (n->region != REG_NONE) {
    if (has_kernel || n->op == OP_RESHAPE) buf_puts(b, " ");
    if (n->region == REG_INPUT || n->region == REG_OUTPUT)
      buf_printf(b, "%s%d+%lld", region_name(n->region), n->io_slot, (long long)n->offset);
    else buf_printf(b, "%s+%lld", region_name(n->region), (long long)n->offset);
  }
  if (n->pack)
    buf_printf(b, "%s%s%d%s", has_kernel || n->region != REG_NONE ? " " : "", n->wino ? "winograd" : "panels", n->pack,
               n->pack_t ? "^T" : "");
  if (stored) buf_printf(b, "%s%s", has_kernel || n->region != REG_NONE ? " " : "", wformat_info(n->wfmt)->name);
  buf_puts(b, "]");
}

/* One node as one line, without the newline. */
static void dump_node(Buf *b, const Graph *g, const Node *n) {
  buf_printf(b, "%%%d = %s", n->id, kiln_ops[n->op].name);
  if (n->op == OP_INPUT || n->op == OP_WEIGHT || n->op == OP_STATE) {
    const char *nm = n->op == OP_INPUT && n->io_index >= 0 && n->io_index < g->ninputs ? g->inputs[n->io_index].name : n->name;
    buf_printf(b, " %s", nm ? nm : "?");
  }
  for (int i = 0; i < n->nin; i++) buf_printf(b, "%s%%%d", i ? ", " : " ", n->in[i]);
  put_attrs(b, n);
  buf_printf(b, " : %s%s", dtype_name(n->dtype), shape_str(&n->shape));
  if (n->op == OP_CONST) put_const_values(b, n);
  if (n->name && n->op != OP_INPUT && n->op != OP_WEIGHT && n->op != OP_STATE)
    buf_printf(b, "  %s %s", n->op == OP_WRITE ? "state" : "module", n->name);   /* a write is named after its state */
  if (n->loc.file && n->loc.line > 0) buf_printf(b, "  @%s:%d", n->loc.file, n->loc.line);
  put_placement(b, g, n);
}

/* The text IR: one line per live node in id order, then the outputs, then kernel and memory
 * totals once passes have set them. Deterministic; it is what --dump-after and golden tests print. */
void graph_dump(Graph *g, FILE *f) {
  Buf b = {0};
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    dump_node(&b, g, n);
    buf_puts(&b, "\n");
  }
  for (int i = 0; i < g->noutputs; i++) buf_printf(&b, "output %s = %%%d\n", g->outputs[i].name, g->outputs[i].node);
  for (int s = 0; g->prog && s < g->nstate_last; s++)
    if (g->state_last[s] >= 0 && g->nodes[g->state_last[s]]->op == OP_WRITE)
      buf_printf(&b, "writes %s = %%%d\n", g->prog->states[s].name, g->state_last[s]);
  int64_t wsize = g->prog ? g->prog->weights_size : g->weights_size;   /* entries share one payload */
  if (g->nkernels || g->arena_size || wsize)
    buf_printf(&b, "kernels %d, arena %lld bytes, weights %lld bytes\n", g->nkernels, (long long)g->arena_size,
               (long long)wsize);
  if (b.len) fwrite(b.data, 1, b.len, f);
  buf_free(&b);
}

/* One line per state: name, type, where it was declared and its place in the block. */
static void dump_states(Buf *b, const Program *p) {
  for (int i = 0; i < p->nstates; i++) {
    const StateDecl *d = &p->states[i];
    buf_printf(b, "state %s : %s%s  @%s:%d  [state+%lld]\n", d->name, dtype_name(d->dtype), shape_str(&d->shape),
               d->loc.file ? d->loc.file : "?", d->loc.line, (long long)d->offset);
  }
}

/* Contract in kiln.h. Each entry lists the states it writes after its outputs. */
void program_dump(Program *p, FILE *f) {
  if (program_is_plain(p)) {
    graph_dump(p->entries[0], f);
    return;
  }
  Buf b = {0};
  dump_states(&b, p);
  if (b.len) fwrite(b.data, 1, b.len, f);
  buf_free(&b);
  for (int e = 0; e < p->nentries; e++) {
    Graph *g = p->entries[e];
    fprintf(f, "entry %s\n", g->entry);
    graph_dump(g, f);
  }
}

/* ---- DOT ---- */

/* Writes s with the characters DOT treats specially inside "..." escaped. */
static void dot_escape(Buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') buf_put(b, "\\", 1);
    buf_put(b, s, 1);
  }
}

/* The live nodes, edges and outputs of g as DOT statements; node ids get prefix pfx
 * (so the entries of a program can share one file). */
static void dot_body(Buf *b, Graph *g, const char *pfx) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    const char *style = n->op == OP_INPUT ? ", style=filled, fillcolor=\"#d8ecff\""
                        : n->op == OP_WEIGHT || n->op == OP_CONST ? ", style=filled, fillcolor=\"#eeeeee\""
                        : n->op == OP_STATE || n->op == OP_WRITE ? ", style=filled, fillcolor=\"#ffe8c8\""
                                                                  : "";
    buf_printf(b, "  %sn%d [label=\"%%%d %s", pfx, n->id, n->id, kiln_ops[n->op].name);
    const char *nm = n->op == OP_INPUT && n->io_index >= 0 && n->io_index < g->ninputs ? g->inputs[n->io_index].name : n->name;
    if (nm) {
      buf_puts(b, "\\n");
      dot_escape(b, nm);
    }
    buf_printf(b, "\\n%s%s\"%s];\n", dtype_name(n->dtype), shape_str(&n->shape), style);
    for (int k = 0; k < n->nin; k++) buf_printf(b, "  %sn%d -> %sn%d;\n", pfx, n->in[k], pfx, n->id);
  }
  for (int i = 0; i < g->noutputs; i++) {
    buf_printf(b, "  %sout%d [label=\"", pfx, i);
    dot_escape(b, g->outputs[i].name);
    buf_printf(b, "\", shape=oval, style=filled, fillcolor=\"#d8ffd8\"];\n  %sn%d -> %sout%d;\n", pfx, g->outputs[i].node,
               pfx, i);
  }
}

/* "digraph "<model>" {" and the shared attributes. */
static void dot_open(Buf *b, const char *model) {
  buf_puts(b, "digraph \"");
  dot_escape(b, model ? model : "model");
  buf_puts(b, "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
}

/* The live graph as Graphviz DOT: a box per node (inputs blue, weights and consts grey,
 * state reads and writes orange), an edge per operand, an oval per output. Deterministic,
 * names escaped. */
void graph_dump_dot(Graph *g, FILE *f) {
  Buf b = {0};
  dot_open(&b, g->model);
  dot_body(&b, g, "");
  buf_puts(&b, "}\n");
  fwrite(b.data, 1, b.len, f);
  buf_free(&b);
}

/* Contract in kiln.h: a plain program as graph_dump_dot; otherwise one cluster per entry. */
void program_dump_dot(Program *p, FILE *f) {
  if (program_is_plain(p)) {
    graph_dump_dot(p->entries[0], f);
    return;
  }
  Buf b = {0};
  dot_open(&b, p->model);
  for (int e = 0; e < p->nentries; e++) {
    buf_printf(&b, "  subgraph cluster_%d {\n  label=\"entry ", e);
    dot_escape(&b, p->entries[e]->entry);
    buf_puts(&b, "\";\n");
    dot_body(&b, p->entries[e], kiln_fmt("e%d_", e));
    buf_puts(&b, "  }\n");
  }
  buf_puts(&b, "}\n");
  fwrite(b.data, 1, b.len, f);
  buf_free(&b);
}
