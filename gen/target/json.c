/*
 * json.c — <m>.json: what a build produced, for tools and test drivers.
 *
 * Keys come in a fixed order (docs/output.md gives the schema); only integers and
 * strings are printed — checksums as 16 hex digits, never floats — so the file is
 * byte-identical across runs, directories and locales. Arrays of records print one
 * record a line, which keeps diffs between builds readable.
 */
#include "kiln.h"

#include <stdlib.h>

#include <string.h>

/* A JSON string literal of s (escape.c). */
static void put_str(Buf *b, const char *s) { esc_json(b, s); }

/* A shape as a JSON array of ints ("[]" for a scalar). */
static void put_shape(Buf *b, const Shape *s) {
  buf_puts(b, "[");
  for (int i = 0; i < s->rank; i++) buf_printf(b, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
  buf_puts(b, "]");
}

/* A 64-bit checksum as a 16-hex-digit JSON string: JSON numbers lose precision past 2^53. */
static void put_hex64(Buf *b, uint64_t v) { buf_printf(b, "\"%016llx\"", (unsigned long long)v); }

/* The schema's name for a region; r must be a valid Region (indexes a table, no check). */
static const char *region_name(Region r) {
  static const char *const names[] = {"none", "weights", "arena", "input", "output", "state"};
  return names[r];
}

/* A kernel's name in the JSON: its C function's (docs/output.md), which emit_c has set. */
static const char *kernel_name(const Kernel *k) { return k->cfunc ? k->cfunc : k->cname; }

/* The name a value is known by: a kernel result by its kernel, an input by its
 * declared name, a weight by its parameter name; otherwise its op and node id. */
static const char *value_name(Graph *g, const Node *n) {
  if (n->kernel >= 0 && n->kernel < g->nkernels) return kernel_name(&g->kernels[n->kernel]);
  if (n->op == OP_INPUT && n->io_index >= 0 && n->io_index < g->ninputs) return g->inputs[n->io_index].name;
  return n->name && *n->name ? n->name : kiln_fmt("%s_%d", kiln_ops[n->op].name, n->id);
}

/* The n input or output records of the signature (name, dtype, shape, bytes), one a line,
 * closing the array the caller opened. */
static void put_io(Buf *b, Graph *g, const GraphIO *io, int n) {
  for (int i = 0; i < n; i++) {
    const Node *nd = graph_node(g, io[i].node);
    buf_puts(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
    put_str(b, io[i].name);
    buf_printf(b, ", \"dtype\": \"%s\", \"shape\": ", dtype_name(nd->dtype));
    put_shape(b, &nd->shape);
    buf_printf(b, ", \"bytes\": %lld}", (long long)node_bytes(nd));
  }
  buf_puts(b, n ? "\n  ]" : "]");
}

/* FNV-1a 64 of n's payload bytes: the hash weights_write kept as it wrote the weight, or
 * (a weight it did not write, a constant) the bytes made again here. */
static uint64_t stored_fnv(const Node *n, int64_t bytes) {
  if (n->op == OP_WEIGHT && n->src && n->src->hashed) return n->src->stored_fnv;
  bool owned;
  const void *p = node_stored(n, &owned);
  uint64_t h = kiln_fnv1a64(p, (size_t)bytes);
  if (owned) free((void *)p);
  node_release(n);
  return h;
}

/* The end of a weights record: offset, the bytes it takes in the payload and their FNV-1a
 * 64, so drivers can check each tensor; a packed weight adds how its panels are laid out
 * (docs/output.md): "packed": {"panel": 32, "k": K, "n": N, "transposed": bool}; a weight in a
 * stored format says which and its matrix (docs/quantization.md): "format": {"name": "q4_0",
 * "panel": 32, "rows": N, "k": K}. */
static void put_stored(Buf *b, const Node *n, int64_t offset) {
  int64_t bytes = node_stored_bytes(n);
  buf_printf(b, ", \"offset\": %lld, \"bytes\": %lld, \"fnv1a64\": ", (long long)offset, (long long)bytes);
  if (!n->data && !(n->op == OP_WEIGHT && n->src)) {
    put_hex64(b, 0);
  } else {
    put_hex64(b, stored_fnv(n, bytes));
    if (n->op == OP_WEIGHT && n->wfmt != WF_F32) {
      buf_printf(b, ", \"format\": {\"name\": \"%s\", \"panel\": %d, \"rows\": %lld, \"k\": %lld}",
                 wformat_info(n->wfmt)->name, KILN_QPANEL, (long long)n->shape.dim[0], (long long)n->shape.dim[1]);
    } else if (n->wino) {
      buf_printf(b, ", \"winograd\": {\"tile\": \"F(2x2, 3x3)\", \"block\": %d}", n->pack);
    } else if (n->pack) {
      int64_t k, c;
      pack_dims(n, &k, &c);
      buf_printf(b, ", \"packed\": {\"panel\": %d, \"k\": %lld, \"n\": %lld, \"transposed\": %s}", n->pack,
                 (long long)k, (long long)c, n->pack_t ? "true" : "false");
    }
  }
  buf_puts(b, "}");
}

/* One record per live WEIGHT/CONST placed in the weights blob, in node order: kind, dtype,
 * shape, then put_stored's fields. */
static void put_weights(Buf *b, Graph *g) {
  int k = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead || n->region != REG_WEIGHTS || (n->op != OP_WEIGHT && n->op != OP_CONST)) continue;
    buf_puts(b, k++ ? ",\n    {\"name\": " : "\n    {\"name\": ");
    put_str(b, value_name(g, n));
    buf_printf(b, ", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": ", kiln_ops[n->op].name, dtype_name(n->dtype));
    put_shape(b, &n->shape);
    put_stored(b, n, n->offset);
  }
  buf_puts(b, k ? "\n  ]" : "]");
}

/* One operand or result of a kernel: where it lives and what it is (a weight in a stored
 * format: the bytes it takes there). */
static void put_value(Buf *b, Graph *g, const Node *n) {
  buf_puts(b, "{\"name\": ");
  put_str(b, value_name(g, n));
  buf_printf(b, ", \"dtype\": \"%s\", \"shape\": ", dtype_name(n->dtype));
  put_shape(b, &n->shape);
  bool io = n->region == REG_INPUT || n->region == REG_OUTPUT;
  buf_printf(b, ", \"region\": \"%s\", \"slot\": %d, \"offset\": %lld, \"bytes\": %lld}", region_name(n->region),
             io ? n->io_slot : -1, (long long)n->offset,
             (long long)(n->op == OP_WEIGHT && n->wfmt != WF_F32 ? node_stored_bytes(n) : node_bytes(n)));
}

/* "file:line" of a node, or the file alone when the line is unknown. */
static const char *loc_of(const Graph *g, const Node *n) {
  const char *file = graph_src_name(g, n->loc.file);
  return n->loc.line > 0 ? kiln_fmt("%s:%d", file, n->loc.line) : file;
}

/* One record per kernel: its nodes' ops (the anchor first, then a fused chain) and
 * their Lua lines ("lua" is the anchor's, the kernel's namesake), what it reads
 * from outside and what it writes. */
static void put_kernels(Buf *b, Graph *g) {
  for (int k = 0; k < g->nkernels; k++) {
    const Kernel *kr = &g->kernels[k];
    const Node *last = graph_node(g, kr->nodes[kr->nnodes - 1]);
    buf_puts(b, k ? ",\n    {\"name\": " : "\n    {\"name\": ");
    put_str(b, kernel_name(kr));
    buf_puts(b, ", \"ops\": [");
    for (int j = 0; j < kr->nnodes; j++)
      buf_printf(b, "%s\"%s\"", j ? ", " : "", kiln_ops[graph_node(g, kr->nodes[j])->op].name);
    buf_puts(b, "], \"lua\": ");
    put_str(b, loc_of(g, graph_node(g, kr->nodes[0])));
    buf_puts(b, ", \"lines\": [");
    for (int j = 0; j < kr->nnodes; j++) {
      if (j) buf_puts(b, ", ");
      put_str(b, loc_of(g, graph_node(g, kr->nodes[j])));
    }
    buf_puts(b, "]");
    /* Inputs: operands of the kernel's nodes that come from outside the kernel. */
    buf_puts(b, ",\n     \"inputs\": [");
    int ni = 0;
    for (int j = 0; j < kr->nnodes; j++) {
      const Node *n = graph_node(g, kr->nodes[j]);
      for (int i = 0; i < n->nin; i++) {
        const Node *src = graph_node(g, n->in[i]);
        if (src->kernel == k) continue;
        if (ni++) buf_puts(b, ", ");
        put_value(b, g, src);
      }
    }
    buf_puts(b, "],\n     \"outputs\": [");
    put_value(b, g, last);
    buf_puts(b, "]}");
  }
  buf_puts(b, g->nkernels ? "\n  ]" : "]");
}

/* Writes <model>.json to o->tmpdir: signature, arena and weights sizes, the blob's checksum
 * (recomputed with weights_checksum), weights, kernels and dispatch counts. Needs memplan done. */
static void emit_plain_json(Graph *g, const EmitOptions *o) {
  Buf b = {0};
  uint64_t checksum = weights_checksum(&g, 1, g->weights_size);   /* what emit_c wrote; cheap next to tracing */
  buf_puts(&b, "{\n  \"model\": ");
  put_str(&b, g->model);
  buf_puts(&b, ",\n  \"inputs\": [");
  put_io(&b, g, g->inputs, g->ninputs);
  buf_puts(&b, ",\n  \"outputs\": [");
  put_io(&b, g, g->outputs, g->noutputs);
  buf_printf(&b, ",\n  \"arena_bytes\": %lld,\n  \"weights_bytes\": %lld,\n  \"weights_checksum\": ",
             (long long)g->arena_size, (long long)g->weights_size);
  put_hex64(&b, checksum);
  buf_puts(&b, ",\n  \"weights\": [");
  put_weights(&b, g);
  buf_puts(&b, ",\n  \"kernels\": [");
  put_kernels(&b, g);
  buf_printf(&b, ",\n  \"dispatches\": {\"c\": %d", g->nkernels);
  if (o->targets & TGT_METAL) buf_printf(&b, ", \"metal\": %d", g->nkernels);
  buf_puts(&b, "}\n}\n");
  kiln_write_file(o->tmpdir, kiln_fmt("%s.json", g->model), b.data, b.len);
  buf_free(&b);
}

/* The shared weights of a program: one record per slot, in offset order. */
static void put_slots(Buf *b, const Program *p) {
  for (int i = 0; i < p->nwslots; i++) {
    const Node *n = p->wslots[i].node;
    buf_puts(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
    put_str(b, n->name && *n->name ? n->name : kiln_fmt("%s_%d", kiln_ops[n->op].name, n->id));
    buf_printf(b, ", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": ", kiln_ops[n->op].name, dtype_name(n->dtype));
    put_shape(b, &n->shape);
    put_stored(b, n, p->wslots[i].offset);
  }
  buf_puts(b, p->nwslots ? "\n  ]" : "]");
}

/* Whether a live node of g reads a version of state s (through views), other than as
 * the version a write updates in place. */
static bool reads_state(const Graph *g, int s) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = n->op == OP_WRITE; k < n->nin; k++) {
      const Node *r = g->nodes[n->in[k]];
      while (r->op == OP_RESHAPE) r = g->nodes[r->in[0]];
      if ((r->op == OP_STATE || r->op == OP_WRITE) && r->a.state == s) return true;
    }
  }
  return false;
}

/* A JSON array of the names of the entries that write state s (writes) or read it. */
static void put_users(Buf *b, const Program *p, int s, bool writes) {
  buf_puts(b, "[");
  int k = 0;
  for (int e = 0; e < p->nentries; e++) {
    const Graph *g = p->entries[e];
    bool used = !writes && reads_state(g, s);
    for (int i = 0; i < g->nnodes && writes && !used; i++) used = !g->nodes[i]->dead && g->nodes[i]->op == OP_WRITE && g->nodes[i]->a.state == s;
    if (!used) continue;
    if (k++) buf_puts(b, ", ");
    put_str(b, g->entry);
  }
  buf_puts(b, "]");
}

/* One record per state: where it lives in the state block and which entries use it. */
static void put_states(Buf *b, const Program *p) {
  for (int s = 0; s < p->nstates; s++) {
    const StateDecl *d = &p->states[s];
    buf_puts(b, s ? ",\n    {\"name\": " : "\n    {\"name\": ");
    put_str(b, d->name);
    buf_printf(b, ", \"dtype\": \"%s\", \"shape\": ", dtype_name(d->dtype));
    put_shape(b, &d->shape);
    buf_printf(b, ", \"offset\": %lld, \"bytes\": %lld,\n     \"written_by\": ", (long long)d->offset,
               (long long)(shape_numel(&d->shape) * dtype_size(d->dtype)));
    put_users(b, p, s, true);
    buf_puts(b, ", \"read_by\": ");
    put_users(b, p, s, false);
    buf_puts(b, "}");
  }
  buf_puts(b, p->nstates ? "\n  ]" : "]");
}

/* One record per entry: its C function, signature, arena, the states it writes, kernels. */
static void put_entries(Buf *b, const Program *p, const EmitOptions *o) {
  for (int e = 0; e < p->nentries; e++) {
    Graph *g = p->entries[e];
    buf_puts(b, e ? ",\n  {\"name\": " : "\n  {\"name\": ");
    put_str(b, g->entry);
    buf_puts(b, ", \"function\": ");
    put_str(b, kiln_fmt("%s_%s", p->model, g->entry));
    buf_puts(b, ", \"macros\": ");   /* the prefix of its #defines: <M>_<ENTRY>_ (<M>_ for the script itself) */
    put_str(b, kiln_fmt("%s_%s", emit_upper(p->model), p->explicit_entries ? kiln_fmt("%s_", emit_upper(g->entry)) : ""));
    buf_printf(b, ", \"arena_bytes\": %lld,\n  \"inputs\": [", (long long)g->arena_size);
    put_io(b, g, g->inputs, g->ninputs);
    buf_puts(b, ",\n  \"outputs\": [");
    put_io(b, g, g->outputs, g->noutputs);
    buf_puts(b, ",\n  \"writes\": [");
    int k = 0;
    for (int s = 0; s < p->nstates; s++) {
      int last = graph_state_last(g, s);
      if (last < 0 || g->nodes[last]->op != OP_WRITE) continue;
      if (k++) buf_puts(b, ", ");
      put_str(b, p->states[s].name);
    }
    buf_puts(b, "],\n  \"kernels\": [");
    put_kernels(b, g);
    buf_printf(b, ",\n  \"dispatches\": {\"c\": %d", g->nkernels);
    if (o->targets & TGT_METAL) buf_printf(b, ", \"metal\": %d", g->nkernels);
    buf_puts(b, "}}");
  }
  buf_puts(b, p->nentries ? "\n  ]" : "]");
}

/* Contract: a plain program as emit_plain_json; otherwise (docs/output.md) the entries
 * with their signatures and kernels, the states, the sizes, the shared weights. */
void emit_json(Program *p, const EmitOptions *o) {
  if (program_is_plain(p)) {
    emit_plain_json(p->entries[0], o);
    return;
  }
  Buf b = {0};
  uint64_t checksum = weights_checksum(p->entries, p->nentries, p->weights_size);
  buf_puts(&b, "{\n  \"model\": ");
  put_str(&b, p->model);
  buf_puts(&b, ",\n  \"entries\": [");
  put_entries(&b, p, o);
  buf_puts(&b, ",\n  \"states\": [");
  put_states(&b, p);
  buf_printf(&b, ",\n  \"state_bytes\": %lld,\n  \"arena_bytes\": %lld,\n  \"weights_bytes\": %lld,\n  \"weights_checksum\": ",
             (long long)p->state_size, (long long)p->arena_size, (long long)p->weights_size);
  put_hex64(&b, checksum);
  buf_puts(&b, ",\n  \"weights\": [");
  put_slots(&b, p);
  buf_puts(&b, "\n}\n");
  kiln_write_file(o->tmpdir, kiln_fmt("%s.json", p->model), b.data, b.len);
  buf_free(&b);
}
