/*
 * memplan.c — static memory planning: where every live value lives at run time.
 *
 * The contract (notes/contracts.md, docs/pipeline.md):
 *   INPUT        REG_INPUT,  io_slot = its position in Graph.inputs, offset 0
 *   WEIGHT/CONST REG_WEIGHTS, 64-byte-aligned offsets in node order; weights_size
 *                is the payload size, rounded up to 64. The entries of a program share
 *                one payload: a WEIGHT of a name, or a CONST of a value, that an earlier
 *                entry placed takes that entry's offset (Program.wslots)
 *   STATE, WRITE REG_STATE at the state's offset in the state block: every version of
 *                a state is the same bytes (pass_schedule made that safe), never reused
 *   kernel result REG_OUTPUT (io_slot i, offset 0) when it is the storage of graph
 *                output i, else REG_ARENA at an offset chosen by first fit over
 *                liveness; arena_size is the high-water mark, a multiple of 64
 *   RESHAPE      a view: region, io_slot and offset of the value it reshapes
 *   fused node   (a kernel's node other than its last) REG_NONE: the value only
 *                exists inside the kernel, between its anchor's store and the chain
 *   scratch      a kernel that needs arena bytes while it runs (kernel_scratch) gets
 *                Kernel.scratch_offset, placed like a value live at that kernel alone
 *
 * Liveness is measured in schedule positions: a value is live from the kernel
 * that writes it to the last kernel that reads it (directly or through views),
 * inclusive at both ends, so a kernel's output never shares bytes with its inputs.
 * Values are placed in schedule order at the lowest 64-aligned offset that does
 * not overlap any already-placed value whose interval intersects. This is the
 * classic greedy; it is not optimal, but it is simple, deterministic and on a
 * chain of ops it reuses two buffers in turn.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

/* n rounded up to a multiple of KILN_ALIGN (n >= 0). */
static int64_t align_up(int64_t n) { return (n + KILN_ALIGN - 1) / KILN_ALIGN * KILN_ALIGN; }

/* The node that owns n's storage: reshapes are views, so follow them down to a non-reshape. */
static Node *root_of(Graph *g, Node *n) {
  while (n->op == OP_RESHAPE) n = graph_node(g, n->in[0]);
  return n;
}

/* One arena value: its producing node, live interval and placement. */
typedef struct {
  int node;
  int first, last;      /* schedule positions, inclusive */
  int64_t size, offset;
  int kernel;           /* >= 0: the scratch of this kernel (node is then -1 - kernel) */
} Interval;

/* Whether weights-region leaves a and b hold the same bytes by definition: a WEIGHT by
 * its name (a parameter is one tensor however many entries use it), a CONST by value. */
static bool same_slot(const Node *a, const Node *b) {
  if (a->op != b->op) return false;
  if (a->op == OP_WEIGHT) return a->name && b->name && strcmp(a->name, b->name) == 0;
  return a->dtype == b->dtype && shape_eq(&a->shape, &b->shape) && memcmp(a->data, b->data, (size_t)node_bytes(a)) == 0;
}

/* The payload offset of weights-region leaf n: the slot of an earlier entry holding the
 * same bytes (among p->wslots[0 .. shared)), else a new slot at the end. */
static int64_t weight_slot(Program *p, int shared, const Node *n) {
  for (int i = 0; i < shared; i++)
    if (same_slot(p->wslots[i].node, n)) return p->wslots[i].offset;
  if (p->nwslots == p->capwslots) {
    p->capwslots = p->capwslots ? 2 * p->capwslots : 64;
    WeightSlot *v = kiln_alloc(sizeof(WeightSlot) * (size_t)p->capwslots);
    if (p->nwslots) memcpy(v, p->wslots, sizeof(WeightSlot) * (size_t)p->nwslots);
    p->wslots = v;
  }
  int64_t at = p->weights_size;
  p->wslots[p->nwslots++] = (WeightSlot){n, at};
  p->weights_size = align_up(at + node_stored_bytes(n));
  return at;
}

/* The first slot of g's own in p->wslots. Entries are planned in order; planning one
 * again first drops the slots it (and any later entry) made. */
static int entry_slots(Graph *g) {
  Program *p = g->prog;
  if (!g->wslot_base) g->wslot_base = p->nwslots + 1;
  int first = g->wslot_base - 1;
  if (first > p->nwslots) die("memplan: entry %s planned after a later one was re-planned", g->entry ? g->entry : "?");
  p->nwslots = first;
  const WeightSlot *last = first ? &p->wslots[first - 1] : NULL;
  p->weights_size = last ? align_up(last->offset + node_stored_bytes(last->node)) : 0;
  return first;
}

/* Places the leaves: inputs into their slots, weights and constants in node order (in
 * a program, sharing the slots of earlier entries), states at their block offsets. */
static void place_leaves(Graph *g) {
  Program *p = g->prog;
  int shared = p ? entry_slots(g) : 0;
  int64_t w = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (n->dead) continue;
    if (n->op == OP_INPUT) {
      n->region = REG_INPUT;
      n->io_slot = n->io_index;
      n->offset = 0;
    } else if (n->op == OP_WEIGHT || n->op == OP_CONST) {
      n->region = REG_WEIGHTS;
      if (p) {
        n->offset = weight_slot(p, shared, n);
      } else {
        n->offset = w;
        w = align_up(w + node_stored_bytes(n));
      }
    } else if (n->op == OP_STATE || n->op == OP_WRITE) {
      if (!p || n->a.state < 0 || n->a.state >= p->nstates) die("memplan: %%%d names state %d it has none of", n->id, n->a.state);
      n->region = REG_STATE;
      n->offset = p->states[n->a.state].offset;
    }
  }
  g->weights_size = p ? p->weights_size : w;
}

static bool is_kernel_result(Graph *g, const Node *n);

/* Marks the storage of each graph output (pass_legalize made them distinct kernel results). */
static void place_outputs(Graph *g) {
  for (int i = 0; i < g->noutputs; i++) {
    Node *r = root_of(g, g->nodes[g->outputs[i].node]);
    if (!is_kernel_result(g, r) || r->region == REG_OUTPUT)
      die("memplan: output %s has storage %%%d that is not a kernel result of its own (legalize missed it)",
          g->outputs[i].name, r->id);
    r->region = REG_OUTPUT;
    r->io_slot = i;
    r->offset = 0;
  }
}

/* The schedule position of each node's kernel; -1 for nodes outside kernels. */
static int *kernel_positions(Graph *g) {
  int *pos = kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) pos[i] = -1;
  for (int k = 0; k < g->nkernels; k++)
    for (int j = 0; j < g->kernels[k].nnodes; j++) pos[g->kernels[k].nodes[j]] = g->kernels[k].order;
  return pos;
}

/* Is n the result of its kernel (its last node)? Only results need storage. */
static bool is_kernel_result(Graph *g, const Node *n) {
  if (n->kernel < 0) return false;
  const Kernel *k = &g->kernels[n->kernel];
  return k->nodes[k->nnodes - 1] == n->id;
}

/* Bytes of scratch kernel kr needs while it runs, 0 for none: a convolution that runs as a
 * matrix product over filters packed at build time reads its input from a zero-padded copy
 * split into stride phases (templates/c/conv_pad.c.tmpl): per channel,
 * PH x PW phases (PH = min(SH, (KH-1)*DH + 1)) of OH + (KH-1)*DH/SH rows by
 * OW + (KW-1)*DW/SW columns, and KILN_PANEL floats of slack that the last panel of pixels
 * reads past the last plane. The C emitter takes that path exactly when the kernel has
 * this scratch; so does one whose filters lie across the lanes (Node.pack KILN_PANEL,
 * templates/c/lanes_lib.c.tmpl). A convolution over Winograd filters (Node.wino) needs its
 * band of input transforms instead (wino_geom). */
static int64_t kernel_scratch(Graph *g, const Kernel *kr) {
  const Node *n = g->nodes[kr->nodes[0]];
  if (n->op != OP_CONV2D || n->dtype != DT_F32) return 0;
  const Node *w = graph_node(g, n->in[1]);
  if (w->wino) return align_up(wino_geom(g, n).scratch);
  const Shape *x = &graph_node(g, n->in[0])->shape, *o = &n->shape;
  const Attrs *a = &n->a;
  const int64_t ocg = o->dim[1] / a->groups, kh = w->shape.dim[2], kw = w->shape.dim[3];
  if ((w->pack != KILN_CONV_BLOCK && w->pack != KILN_PANEL) || ocg < KILN_CONV_GEMM_MIN_OCG || kh * kw > KILN_GRID_TAPS ||
      a->pad[0] < 0 || a->pad[1] < 0)
    return 0;
  const int64_t ry = (kh - 1) * a->dilation[0], rx = (kw - 1) * a->dilation[1], sh = a->stride[0], sw = a->stride[1];
  const int64_t ph = ry + 1 < sh ? ry + 1 : sh, pw = rx + 1 < sw ? rx + 1 : sw;
  const int64_t hq = o->dim[2] + ry / sh, wq = o->dim[3] + rx / sw;
  return align_up((x->dim[0] * x->dim[1] * ph * pw * hq * wq + KILN_PANEL) * (int64_t)sizeof(float));
}

/* Live intervals of every arena value, in schedule order of their producers, each
 * kernel's scratch (kernel_scratch) after its result, live at the kernel alone. */
static Interval *arena_intervals(Graph *g, int *count) {
  int *pos = kernel_positions(g);
  int *slot = kiln_alloc(sizeof(int) * (size_t)(g->nnodes + 1));
  Interval *iv = kiln_alloc(sizeof(Interval) * (size_t)(g->nnodes + g->nkernels + 1));
  int n = 0;
  for (int k = 0; k < g->nkernels; k++) {
    Kernel *kr = &g->kernels[k];
    Node *r = g->nodes[kr->nodes[kr->nnodes - 1]];
    kr->scratch = kernel_scratch(g, kr);
    kr->scratch_offset = 0;
    if (r->region != REG_OUTPUT && r->region != REG_STATE) {
      r->region = REG_ARENA;
      slot[r->id] = n + 1;
      iv[n++] = (Interval){r->id, kr->order, kr->order, align_up(node_bytes(r)), 0, -1};
    }
    if (kr->scratch) iv[n++] = (Interval){-1 - k, kr->order, kr->order, kr->scratch, 0, k};
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *c = g->nodes[i];
    if (c->dead || pos[i] < 0) continue;
    for (int k = 0; k < c->nin; k++) {
      int s = slot[root_of(g, g->nodes[c->in[k]])->id];
      if (s && iv[s - 1].last < pos[i]) iv[s - 1].last = pos[i];
    }
  }
  *count = n;
  return iv;
}

/* qsort order for placed intervals: by offset, ties by node id, so placement is deterministic. */
static int by_offset(const void *a, const void *b) {
  const Interval *x = *(Interval *const *)a, *y = *(Interval *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : x->node - y->node;
}

/* First fit: the lowest offset where v fits between the placed values live with it. */
static int64_t first_fit(Interval *v, Interval *placed, int nplaced, Interval **scratch) {
  int m = 0;
  for (int i = 0; i < nplaced; i++)
    if (placed[i].first <= v->last && v->first <= placed[i].last) scratch[m++] = &placed[i];
  qsort(scratch, (size_t)m, sizeof *scratch, by_offset);
  int64_t at = 0;
  for (int i = 0; i < m; i++) {
    if (scratch[i]->offset >= at + v->size) break;
    int64_t end = scratch[i]->offset + scratch[i]->size;
    if (end > at) at = end;
  }
  return at;
}

/* Contract: see the file comment. Needs pass_group and pass_schedule. Views take
 * their root's placement; nodes inside a kernel that are not its result get none. */
void pass_memplan(Graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    g->nodes[i]->region = REG_NONE;
    g->nodes[i]->io_slot = -1;
    g->nodes[i]->offset = 0;
  }
  place_leaves(g);
  place_outputs(g);
  int n;
  Interval *iv = arena_intervals(g, &n);
  Interval **scratch = kiln_alloc(sizeof(Interval *) * (size_t)(n + 1));
  int64_t high = 0;
  for (int i = 0; i < n; i++) {
    iv[i].offset = first_fit(&iv[i], iv, i, scratch);
    if (iv[i].kernel >= 0)
      g->kernels[iv[i].kernel].scratch_offset = iv[i].offset;
    else
      g->nodes[iv[i].node]->offset = iv[i].offset;
    if (iv[i].offset + iv[i].size > high) high = iv[i].offset + iv[i].size;
  }
  g->arena_size = high;
  for (int i = 0; i < g->nnodes; i++) {
    Node *v = g->nodes[i];
    if (v->dead || v->op != OP_RESHAPE) continue;
    Node *r = root_of(g, v);
    v->region = r->region;
    v->io_slot = r->io_slot;
    v->offset = r->offset;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *v = g->nodes[i];
    if (!v->dead && v->region == REG_NONE && (v->kernel < 0 || is_kernel_result(g, v)))
      die("memplan: live %%%d (%s) got no placement", v->id, kiln_ops[v->op].name);
  }
}
