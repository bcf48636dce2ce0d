/*
 * narrow.c — pass_narrow: a slice of a value that nothing else reads moves up through the
 * operation that computes it, so the operation computes only the slice.
 *
 * An LLM's prefill that returns the last position's logits ends in x[T-1:T] of the last
 * layer's output: traced as written, the whole last layer runs over every position and all
 * but one row is thrown away. Moved up, the slice narrows the residual adds, the
 * feed-forward products, the norms, the output projection and, where attention is spelled
 * as matmul and softmax, the last query's scores; it stops at a value another operation
 * also reads (the keys and values still need every position). llama.cpp does the same by
 * hand (its graph takes the output rows before the last layer's products). A gather by a
 * vector of indices (index_select: llm.lua's prefill_logits=last takes the row `last`)
 * moves the same way, each input taking the same indices along its own axis; the kernels
 * clamp an index out of range, so every narrowed operation reads the one row the gather
 * would have read.
 *
 * Every operation it moves through computes each output element from the elements of its
 * inputs at the same index along the sliced axis (elementwise operations, the rows of a
 * matrix product, norms and softmax over later axes, reshapes that keep the axis and all
 * before it, transposes, concatenations along another axis, slices of later axes), so the
 * narrowed graph computes the same values in the same order. It leaves alone what would
 * change how the C target computes them (a softmax whose inner size would become 1 takes
 * another template; a product whose kernel runs transposed, under 4 columns, would run
 * plain) or how a weight is stored (a matmul's weight operand is never sliced: pass_quant
 * and pass_pack would see it read otherwise than by rows). So the C target's bits are the
 * same (tests/passes/narrowcheck.py); Metal's one-row products sum in another order.
 * KILN_NONARROW=1 turns it off (that check's other build).
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

/* The single axis s slices (the others whole), or -1 when it slices several, none, or
 * reads a value of rank 0. */
static int slice_axis(const Graph *g, const Node *s) {
  const Shape *x = &g->nodes[s->in[0]]->shape;
  int ax = -1;
  for (int d = 0; d < x->rank; d++) {
    if (s->a.start[d] == 0 && s->a.end[d] == x->dim[d] && s->a.step[d] == 1) continue;
    if (ax >= 0) return -1;
    ax = d;
  }
  return ax;
}

/* For operation p sliced along its axis ax: the axis of p's input k that the slice maps to
 * (that input is then sliced the same way), -1 for an input read whole, or -2 when the
 * slice cannot move through p. */
static int family_axis(Graph *g, const Node *p, int k, int ax) {
  const Node *in = g->nodes[p->in[k]];
  const int r = p->shape.rank, ri = in->shape.rank;
  switch (kiln_ops[p->op].family) {
  case FAM_UNARY:
  case FAM_CAST:
    return ax;
  case FAM_BINARY:
  case FAM_SELECT: {   /* numpy broadcasting: an input of size 1 there, or without the axis, is read whole */
    const int j = ax - (r - ri);
    return j < 0 || in->shape.dim[j] == 1 ? -1 : j;
  }
  case FAM_MATMUL: {   /* x [.., M, K] (trans_x: [.., K, M]), y [.., K, N] (trans_y: [.., N, K]) */
    const Node *x = g->nodes[p->in[0]], *y = g->nodes[p->in[1]];
    if (x->shape.rank < 2 || y->shape.rank < 2) return -2;
    const MatmulShape ms = matmul_shape(g, p);
    if (matmul_swapped(&ms) || ax == r - 1) return -2;   /* its kernel; columns: a weight's, laid out whole */
    const int j = ax == r - 2 ? (k == 0 ? (p->a.trans_x ? ri - 1 : ri - 2) : -1) : ax - (r - ri);
    if (j < 0 || (ax < r - 2 && in->shape.dim[j] == 1)) return -1;   /* read whole (broadcast) */
    return in->op == OP_WEIGHT ? -2 : j;
  }
  case FAM_NORM:   /* over dims a.axis..end: gamma and beta read whole */
    return ax < p->a.axis ? (k == 0 ? ax : -1) : -2;
  case FAM_SOFTMAX:   /* an outer axis: its inner size stays (an inner size of 1 is another template) */
    return ax < p->a.axis ? ax : -2;
  case FAM_VIEW:   /* a reshape keeping dims 0..ax as they are */
    if (ri <= ax) return -2;
    for (int d = 0; d <= ax; d++)
      if (in->shape.dim[d] != p->shape.dim[d]) return -2;
    return ax;
  case FAM_TRANSPOSE:
    return p->a.perm[ax];
  case FAM_CONCAT:
    return ax != p->a.axis ? ax : -2;
  case FAM_SLICE:   /* of later axes only (RoPE's halves): the two commute, and two never swap back */
    for (int d = 0; d <= ax; d++)
      if (p->a.start[d] != 0 || p->a.end[d] != in->shape.dim[d] || p->a.step[d] != 1) return -2;
    return ax;
  default:
    return -2;
  }
}

/* The axis a pick s (a slice, or a gather by a vector of indices) narrows, or -1 when it
 * cannot move: a slice of several axes; a gather whose indices are not a vector, or are as
 * many as the axis's rows or more (a beam's index_select repeating rows: moved up, it would
 * multiply the work, and an input read whole along a size-1 axis could not take it). */
static int pick_axis(const Graph *g, const Node *s) {
  if (s->op == OP_SLICE) return slice_axis(g, s);
  if (s->op != OP_GATHER) return -1;
  const Shape *idx = &g->nodes[s->in[1]]->shape, *x = &g->nodes[s->in[0]]->shape;
  return idx->rank == 1 && idx->dim[0] < x->dim[s->a.axis] ? s->a.axis : -1;
}

/* family_axis, but an i64 value is never sliced: only its cast to i32 may read it. Nor is
 * a weight or constant gathered: pass_pack and pass_quant store a table that a gather
 * reads as an embedding. */
static int input_axis(Graph *g, const Node *s, const Node *p, int k, int ax) {
  const int j = family_axis(g, p, k, ax);
  const Node *in = g->nodes[p->in[k]];
  if (j >= 0 && s->op == OP_GATHER && (in->op == OP_WEIGHT || in->op == OP_CONST)) return -2;
  return j >= 0 && in->dtype == DT_I64 ? -2 : j;
}

/* Appends s's pick of node id along its axis ax (s picks its input along sax): a slice
 * with s's range, or a gather by s's indices. It has one reader (the caller's rewritten
 * s); a gather is one more reader of the indices. */
static int add_pick(Graph *g, int id, int ax, const Node *s, int sax) {
  const Node *x = g->nodes[id];
  Attrs a = {0};
  int in[2] = {id, s->op == OP_GATHER ? s->in[1] : 0};
  if (s->op == OP_GATHER) {
    a.axis = ax;
  } else {
    for (int d = 0; d < x->shape.rank; d++) a.start[d] = 0, a.end[d] = x->shape.dim[d], a.step[d] = 1;
    a.start[ax] = s->a.start[sax], a.end[ax] = s->a.end[sax], a.step[ax] = s->a.step[sax];
  }
  char err[256];
  Node *n = graph_add(g, s->op, in, s->op == OP_GATHER ? 2 : 1, &a, s->loc, err, sizeof err);
  if (!n) die("narrow: %s of %%%d: %s", kiln_ops[s->op].name, id, err);
  n->nuses = 1;
  if (s->op == OP_GATHER) g->nodes[s->in[1]]->nuses++;
  return n->id;
}

/* Moves pick s up through its input p when it can: s becomes p's operation over picks of
 * p's inputs (placed just before s), with p's name and line; p is dead. nuses stay true
 * without a recount. */
static bool narrow_one(Graph *g, Node *s) {
  const int sax = pick_axis(g, s);
  Node *p = g->nodes[s->in[0]];
  if (sax < 0 || p->nuses != 1 || p->dead || kiln_ops[p->op].family == FAM_LEAF) return false;
  int *ax = kiln_alloc(sizeof(int) * (size_t)p->nin);
  for (int k = 0; k < p->nin; k++)
    if ((ax[k] = input_axis(g, s, p, k, sax)) == -2) return false;
  const int n0 = g->nnodes;
  if (s->op == OP_GATHER) g->nodes[s->in[1]]->nuses--;   /* s reads p's inputs now, not the indices */
  int *in = kiln_alloc(sizeof(int) * (size_t)p->nin);
  for (int k = 0; k < p->nin; k++) in[k] = ax[k] < 0 ? p->in[k] : add_pick(g, p->in[k], ax[k], s, sax);
  Attrs a = p->a;
  if (p->op == OP_RESHAPE) a.reshape = s->shape;
  if (p->op == OP_SLICE) a.start[sax] = 0, a.end[sax] = s->shape.dim[sax], a.step[sax] = 1;   /* its input is narrowed */
  const Shape want = s->shape;
  s->op = p->op, s->a = a, s->in = in, s->nin = p->nin, s->name = p->name, s->loc = p->loc;
  char err[256];
  if (!shape_infer(g, s, err, sizeof err) || !shape_eq(&s->shape, &want))
    die("narrow: %s over picks does not give its pick's shape", kiln_ops[s->op].name);
  p->dead = true, p->nuses = 0;   /* its inputs' reads pass to s or to the new picks */
  if (g->nnodes > n0) graph_move_all_before(g, n0, s->id);
  return true;
}

static bool narrow_disabled(void) {
  const char *e = getenv("KILN_NONARROW");
  return e && *e && strcmp(e, "0") != 0;
}

/* Contract in kiln.h. Each sweep takes the nodes in order; a slice that moves is looked at
 * again where it now is (its new slices, just before it), so one sweep moves a slice as far
 * as it goes. Then cse: two slices of one value become one, which the next sweep may move. */
void pass_narrow(Graph *g) {
  if (narrow_disabled()) return;
  pass_dce(g);
  for (bool moved = true; moved;) {
    moved = false;
    for (int i = 0; i < g->nnodes; i++) {
      Node *s = g->nodes[i];
      if (!s->dead && (s->op == OP_SLICE || s->op == OP_GATHER) && narrow_one(g, s)) {
        moved = true;
        i--;   /* position i now holds the first new slice, or s itself */
      }
    }
    if (moved) pass_cse(g);
  }
}
