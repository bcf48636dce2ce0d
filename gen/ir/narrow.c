/*
 * narrow.c — pass_narrow: a slice of a value that nothing else reads moves up through the
 * operation that computes it, so the operation computes only the slice.
 *
 * An LLM's prefill that returns the last position's logits ends in x[T-1:T] of the last
 * layer's output: traced as written, the whole last layer runs over every position and all
 * but one row is thrown away. Moved up, the slice narrows the residual adds, the
 * feed-forward products, the norms, the output projection and the queries of the last
 * attention to that row; it stops at a value another operation also reads (the keys and
 * values still need every position). llama.cpp does the same by hand (its graph takes the
 * output rows before the last layer's products).
 *
 * Every operation it moves through computes each output element from the elements of its
 * inputs at the same index along the sliced axis (elementwise operations, the rows of a
 * matrix product, norms and softmax over other axes, reshapes that keep the axis and all
 * before it, transposes, concatenations along another axis, slices of other axes), so the narrowed graph computes
 * the same values in the same order: the same bits.
 */
#include "kiln.h"

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
static int input_axis(const Graph *g, const Node *p, int k, int ax) {
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
    if (ax == r - 2) return k == 0 ? (p->a.trans_x ? ri - 1 : ri - 2) : -1;
    if (ax == r - 1) return -2;   /* columns: the weight's, which pass_pack lays out whole */
    if (kiln_ops[in->op].family == FAM_LEAF) return -2;
    const int j = ax - (r - ri);
    return j < 0 || in->shape.dim[j] == 1 ? -1 : j;
  }
  case FAM_NORM:   /* over dims a.axis..end: gamma and beta read whole */
    return ax < p->a.axis ? (k == 0 ? ax : -1) : -2;
  case FAM_SOFTMAX:
    return ax != p->a.axis ? ax : -2;
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

/* Appends a slice of node id along axis ax as s slices its input along sax. */
static int add_slice(Graph *g, int id, int ax, const Node *s, int sax) {
  const Node *x = g->nodes[id];
  Attrs a = {0};
  for (int d = 0; d < x->shape.rank; d++) a.start[d] = 0, a.end[d] = x->shape.dim[d], a.step[d] = 1;
  a.start[ax] = s->a.start[sax], a.end[ax] = s->a.end[sax], a.step[ax] = s->a.step[sax];
  char err[256];
  Node *n = graph_add(g, OP_SLICE, &id, 1, &a, s->loc, err, sizeof err);
  if (!n) die("narrow: slice of %%%d: %s", id, err);
  return n->id;
}

/* Moves slice s up through its input p when it can: s becomes p's operation over slices
 * of p's inputs (placed just before s), with p's name and line; p is left unread. */
static bool narrow_one(Graph *g, Node *s) {
  const int sax = slice_axis(g, s);
  Node *p = g->nodes[s->in[0]];
  if (sax < 0 || p->nuses != 1 || p->dead || kiln_ops[p->op].family == FAM_LEAF) return false;
  int *axes = kiln_alloc(sizeof(int) * (size_t)p->nin);
  for (int k = 0; k < p->nin; k++)
    if ((axes[k] = input_axis(g, p, k, sax)) == -2) return false;
  const int n0 = g->nnodes;
  int *in = kiln_alloc(sizeof(int) * (size_t)p->nin);
  for (int k = 0; k < p->nin; k++) in[k] = axes[k] < 0 ? p->in[k] : add_slice(g, p->in[k], axes[k], s, sax);
  Attrs a = p->a;
  if (p->op == OP_RESHAPE) a.reshape = s->shape;
  if (p->op == OP_SLICE) a.start[sax] = 0, a.end[sax] = s->shape.dim[sax], a.step[sax] = 1;   /* its input is narrowed */
  const Shape want = s->shape;
  s->op = p->op, s->a = a, s->in = in, s->nin = p->nin, s->name = p->name, s->loc = p->loc;
  char err[256];
  if (!shape_infer(g, s, err, sizeof err) || !shape_eq(&s->shape, &want))
    die("narrow: %s over slices does not give its slice's shape", kiln_ops[s->op].name);
  if (g->nnodes > n0) {
    int *host = kiln_alloc(sizeof(int) * (size_t)(g->nnodes - n0));
    for (int j = 0; j < g->nnodes - n0; j++) host[j] = s->id;
    graph_move_before(g, n0, host);
  }
  return true;
}

/* Contract in kiln.h. */
void pass_narrow(Graph *g) {
  pass_dce(g);
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; i < g->nnodes && !again; i++) {
      Node *s = g->nodes[i];
      if (!s->dead && s->op == OP_SLICE && narrow_one(g, s)) again = true;
    }
    if (again) {
      pass_cse(g);   /* two slices of one value become one, which may then move on */
      pass_dce(g);
    }
  }
}
