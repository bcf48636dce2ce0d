/*
 * coreml_rank.c — Core ML's rank limit as a lowering problem: MIL's ops stop at rank 5,
 * Kiln's values go to rank 6. A value of rank > 5 is held in the program with its leading
 * dims folded into one ([a, b, c, d, e, f] as [a·b, c, d, e, f]: the same elements in the
 * same row-major order), which every elementwise op and every reshape computes on
 * unchanged. Before the emitter lowers a graph, coreml_fold_ranks checks that each op
 * touching such a value is one of those, that its operands fold alike (broadcasting only
 * within the last four dims, or across the folded ones whole), and gives each such node
 * its folded shape; coreml_unfold_ranks puts the shapes back afterwards, since the graph
 * is shared with the other targets of the build. Anything else (a reduction over a folded
 * dim, a transpose, a graph input or output of rank 6) is a user error naming the op, the
 * target and the Lua line: the model can reshape around it.
 */
#include "coreml_rank.h"

enum { COREML_MAX_RANK = 5 };

/* s with its leading rank-4 dims folded into one (s itself when its rank is <= 5). */
static Shape folded(const Shape *s) {
  if (s->rank <= COREML_MAX_RANK) return *s;
  Shape f = {.rank = COREML_MAX_RANK};
  int lead = s->rank - (COREML_MAX_RANK - 1);
  f.dim[0] = 1;
  for (int i = 0; i < lead; i++) f.dim[0] *= s->dim[i];
  for (int i = 1; i < COREML_MAX_RANK; i++) f.dim[i] = s->dim[lead + i - 1];
  return f;
}

/* Whether a and b are the same dims. */
static bool same_shape(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

/* Whether operand shape o of an elementwise op whose result s has rank > 5 still
 * broadcasts right once both are folded: an operand of rank <= 4 lies within the last
 * four dims; a larger one must match s on every folded dim, or be 1 on all of them, and
 * its own MIL shape (folded, if it is of rank > 5 itself) must be that. */
static bool operand_folds(const Shape *o, const Shape *s) {
  if (o->rank <= COREML_MAX_RANK - 1) return true;
  int lead = s->rank - (COREML_MAX_RANK - 1), pad = s->rank - o->rank;
  bool equal = true, ones = true;
  Shape want = {.rank = COREML_MAX_RANK};
  want.dim[0] = 1;
  for (int i = 0; i < lead; i++) {
    int64_t d = i < pad ? 1 : o->dim[i - pad];
    equal = equal && d == s->dim[i];
    ones = ones && d == 1;
    want.dim[0] *= d;
  }
  for (int i = 1; i < COREML_MAX_RANK; i++) want.dim[i] = o->dim[o->rank - COREML_MAX_RANK + i];
  Shape have = folded(o);
  return (equal || ones) && same_shape(&have, &want);
}

/* Whether node n may compute on folded values: a reshape always; an elementwise op when
 * each operand folds with its result (operand_folds). */
static bool foldable(const Graph *g, const Node *n) {
  switch (kiln_ops[n->op].family) {
  case FAM_VIEW: return true;
  case FAM_UNARY: case FAM_BINARY: case FAM_SELECT: case FAM_CAST:
    for (int i = 0; i < n->nin; i++)
      if (!operand_folds(&graph_node((Graph *)g, n->in[i])->shape, &n->shape)) return false;
    return true;
  default: return false;
  }
}

/* "input NAME" or "output NAME" when node id is one of g's, else NULL. */
static const char *io_name(const Graph *g, int id) {
  for (int i = 0; i < g->ninputs; i++)
    if (g->inputs[i].node == id) return kiln_fmt("input %s", g->inputs[i].name);
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i].node == id) return kiln_fmt("output %s", g->outputs[i].name);
  return NULL;
}

/* See coreml_rank.h: check every node touching rank > 5 first (an error leaves g as it
 * was), then fold every live node's shape. */
Shape *coreml_fold_ranks(Graph *g) {
  Shape *saved = kiln_alloc(sizeof(Shape) * (size_t)(g->nnodes + 1));
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    saved[i] = n->shape;
    if (n->dead) continue;
    bool high = n->shape.rank > COREML_MAX_RANK;
    for (int k = 0; k < n->nin; k++) high = high || graph_node(g, n->in[k])->shape.rank > COREML_MAX_RANK;
    if (!high) continue;
    const char *io = n->shape.rank > COREML_MAX_RANK ? io_name(g, n->id) : NULL;
    if (io)
      kiln_error_at(n->loc, "%s: %s %s has rank %d; the Core ML target allows at most rank 5 at the model's inputs and "
                    "outputs (reshape it)", kiln_ops[n->op].name, io, shape_str(&n->shape), n->shape.rank);
    if (kiln_ops[n->op].family != FAM_LEAF && !foldable(g, n))
      kiln_error_at(n->loc, "%s: a rank-%d value on the Core ML target, whose ops stop at rank 5: only elementwise ops "
                    "and reshapes are lowered at that rank (their leading dims folded into one); reshape to rank <= 5 "
                    "around this op", kiln_ops[n->op].name,
                    n->shape.rank > COREML_MAX_RANK ? n->shape.rank : COREML_MAX_RANK + 1);
  }
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead) g->nodes[i]->shape = folded(&g->nodes[i]->shape);
  return saved;
}

/* See coreml_rank.h. */
void coreml_unfold_ranks(Graph *g, const Shape *saved) {
  for (int i = 0; i < g->nnodes; i++) g->nodes[i]->shape = saved[i];
}
