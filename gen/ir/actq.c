/*
 * actq.c — pass_actq: `--activations ggml`, products that round their activations the way
 * llama.cpp (ggml) does.
 *
 * By default a product with a weight kept in a stored format multiplies the weight's
 * exact values by f32 activations: the most accurate result the stored weights allow.
 * ggml's CPU kernels do something else: before a product with Q8_0 or Q4_0 weights they
 * quantize each row of activations to Q8_0 blocks (32 values, a float16 scale), before
 * Q4_K or Q6_K to Q8_K blocks (256 values, a float scale), before F16 to float16, and
 * then use integer (or half) dot products. The rounding costs accuracy, and on a model
 * with near-ties in its argmax it decides which token wins: a user checking a Kiln build
 * against llama.cpp on the same GGUF needs Kiln to round the same way.
 *
 * This pass (Program.ggml_acts) puts that rounding in the graph, built from ordinary ops,
 * so every target and the interpreter compute it with kernels that are already tested:
 *
 *   Q8_0 (ggml's quantize_row_q8_0, its AVX path): per block of 32 along k,
 *     amax = max |x|, d = f16(amax / 127), id = amax != 0 ? 127 / amax : 0,
 *     x' = rint(x * id) * d                       (rint: halves to even, _MM_ROUND_NEAREST)
 *   Q8_K (quantize_row_q8_K_ref): per block of 256, max = the first x of largest |x|,
 *     iscale = -127 / max, x' = min(rint(iscale * x), 127) * (1 / iscale), 0 where max is 0
 *   F16: x' = f16(x)
 *
 * The products then multiply x' by the weight's values: the same real numbers ggml sums,
 * in another order, so results agree to float rounding (about 1e-7 of the scale), not bit
 * for bit. docs/quantization.md says what was compared with llama.cpp.
 */
#include "kiln.h"

#include <string.h>

/* The rounding a stored format's ggml product applies to its activations. */
typedef enum { ACT_NONE, ACT_Q8_0, ACT_Q8_K, ACT_F16 } ActRound;

enum { ACT_NCONST = 8 };   /* distinct scalars the roundings use (127, 0, -127, 1) */

static ActRound act_round(WFormat f) {
  switch (f) {
  case WF_Q8_0: case WF_Q4_0: return ACT_Q8_0;
  case WF_Q4_K: case WF_Q6_K: return ACT_Q8_K;
  case WF_F16: return ACT_F16;
  default: return ACT_NONE;
  }
}

/* Appends the nodes rounding one product's activations to g (pass_actq moves them in
 * front of the product afterwards). */
typedef struct {
  Graph *g;
  const Node *mm;               /* the product: its line and name go on every node made */
  const char *name;             /* "<product>.act": the kernels read as the product's */
  float *cval;                  /* the scalar constants made so far in this graph (one of each) */
  int *cid, *nc;
} Builder;

/* A node of op over in, named and placed as the product; its id. A shape rule failing
 * here is Kiln's bug: the shapes come from a product that passed its own. */
static int add(Builder *b, OpKind op, const int *in, int nin, const Attrs *a) {
  char err[256];
  Node *n = graph_add(b->g, op, in, nin, a, b->mm->loc, err, sizeof err);
  if (!n) die("pass_actq: %s", err);
  n->name = b->name;
  return n->id;
}

static int add1(Builder *b, OpKind op, int x) { return add(b, op, &x, 1, NULL); }

static int add2(Builder *b, OpKind op, int x, int y) {
  int in[2] = {x, y};
  return add(b, op, in, 2, NULL);
}

/* A rank-0 f32 CONST holding v: the graph's first one of that value (it sits before the
 * first product that needs it, so every later one may read it). */
static int scalar(Builder *b, float v) {
  for (int i = 0; i < *b->nc; i++)
    if (b->cval[i] == v) return b->cid[i];
  Shape s = {0};
  Node *c = graph_leaf(b->g, OP_CONST, DT_F32, &s, b->name, b->mm->loc);
  c->data = kiln_alloc(sizeof v);
  memcpy(c->data, &v, sizeof v);
  if (*b->nc == ACT_NCONST) die("pass_actq: more than %d constants", ACT_NCONST);
  b->cval[*b->nc] = v, b->cid[(*b->nc)++] = c->id;
  return c->id;
}

static int reshape(Builder *b, int x, const Shape *s) {
  Attrs a = {0};
  a.reshape = *s;
  return add(b, OP_RESHAPE, &x, 1, &a);
}

/* x (rank r, its last dim k, a multiple of blk) as [..., k / blk, blk]. */
static int blocks(Builder *b, int x, int blk) {
  Shape s = graph_node(b->g, x)->shape;
  int r = s.rank;
  if (r + 1 > KILN_MAX_RANK) die("pass_actq: activations of rank %d", r);
  s.dim[r] = blk;
  s.dim[r - 1] /= blk;
  s.rank = r + 1;
  return reshape(b, x, &s);
}

/* Q8_0 rounding of x's last dim (see the file comment). */
static int round_q8_0(Builder *b, int x) {
  int xb = blocks(b, x, 32), last = graph_node(b->g, xb)->shape.rank - 1;
  Attrs mx = {0};
  mx.axes = 1u << last;
  mx.keepdims = true;
  int ab = add1(b, OP_ABS, xb);
  int amax = add(b, OP_REDUCE_MAX, &ab, 1, &mx);
  int c127 = scalar(b, 127.0f), c0 = scalar(b, 0.0f);
  int d = add1(b, OP_ROUND_F16, add2(b, OP_DIV, amax, c127));
  int cond[3] = {add2(b, OP_NE, amax, c0), add2(b, OP_DIV, c127, amax), c0};
  int id = add(b, OP_WHERE, cond, 3, NULL);
  int q = add1(b, OP_ROUND, add2(b, OP_MUL, xb, id));
  return reshape(b, add2(b, OP_MUL, q, d), &graph_node(b->g, x)->shape);
}

/* Q8_K rounding of x's last dim (see the file comment). */
static int round_q8_k(Builder *b, int x) {
  int xb = blocks(b, x, 256), last = graph_node(b->g, xb)->shape.rank - 1;
  Attrs am = {0};
  am.axis = last;
  am.keepdims = true;
  int ab = add1(b, OP_ABS, xb);
  int at = add(b, OP_ARGMAX, &ab, 1, &am);
  int gin[2] = {xb, at};
  int mx = add(b, OP_GATHER_ELEMENTS, gin, 2, &am);
  int c127 = scalar(b, 127.0f), c0 = scalar(b, 0.0f);
  int iscale = add2(b, OP_DIV, scalar(b, -127.0f), mx);
  int q = add2(b, OP_MIN, add1(b, OP_ROUND, add2(b, OP_MUL, iscale, xb)), c127);
  int xq = add2(b, OP_MUL, q, add2(b, OP_DIV, scalar(b, 1.0f), iscale));
  int sel[3] = {add2(b, OP_EQ, mx, c0), c0, xq};
  return reshape(b, add(b, OP_WHERE, sel, 3, NULL), &graph_node(b->g, x)->shape);
}

/* x with its dims d0 and d1 swapped (the rounding works along the last dim). */
static int swap_dims(Builder *b, int x, int d0, int d1) {
  Attrs a = {0};
  int r = graph_node(b->g, x)->shape.rank;
  for (int i = 0; i < r; i++) a.perm[i] = i;
  a.perm[d0] = d1, a.perm[d1] = d0;
  return add(b, OP_TRANSPOSE, &x, 1, &a);
}

/* x rounded by how along its dim axis (the product's reduction dim). */
static int rounded(Builder *b, int x, ActRound how, int axis) {
  int last = graph_node(b->g, x)->shape.rank - 1;
  if (axis != last) x = swap_dims(b, x, axis, last);
  int y = how == ACT_F16 ? add1(b, OP_ROUND_F16, x) : how == ACT_Q8_0 ? round_q8_0(b, x) : round_q8_k(b, x);
  return axis != last ? swap_dims(b, y, axis, last) : y;
}

/* A product's stored-format weight slot, or -1: the slot whose WEIGHT has a format ggml
 * rounds activations for (pass_quant gave only row-read weights a format). */
static int weight_slot(Graph *g, const Node *mm, ActRound *how) {
  for (int s = 0; s < 2; s++) {
    const Node *w = graph_node(g, mm->in[s]);
    if (w->op == OP_WEIGHT && (*how = act_round(w->wfmt)) != ACT_NONE) return s;
  }
  return -1;
}

/* Earlier roundings, reused by products reading the same activations the same way
 * (q, k and v; gate and up): nodes [first, end) made in front of node host. */
typedef struct {
  int x, axis, out, first, end, host;
  ActRound how;
} Done;

/* Contract in kiln.h. With Program.ggml_acts set, each live MATMUL one of whose operands
 * is a WEIGHT whose stored format is Q8_0, Q4_0, Q4_K, Q6_K or F16 reads, instead of its
 * other operand, that operand rounded along the product's reduction dim as ggml rounds it;
 * the new nodes sit just before the first product using them (ids renumbered, the graph
 * stays topological) and Node.nuses is recomputed. Without it, or with no such product,
 * g is untouched. */
void pass_actq(Graph *g) {
  if (!g->prog || !g->prog->ggml_acts) return;
  int n0 = g->nnodes, ndone = 0, nc = 0, cid[ACT_NCONST];
  float cval[ACT_NCONST];
  Done *done = kiln_alloc(sizeof(Done) * (size_t)(n0 + 1));
  for (int i = 0; i < n0; i++) {
    Node *mm = g->nodes[i];
    ActRound how;
    int ws;
    if (mm->dead || mm->op != OP_MATMUL || (ws = weight_slot(g, mm, &how)) < 0) continue;
    int as = 1 - ws, x = mm->in[as], r = graph_node(g, x)->shape.rank;
    bool t = as == 0 ? mm->a.trans_x : mm->a.trans_y;
    int axis = as == 0 ? (t ? r - 2 : r - 1) : (t ? r - 1 : r - 2);
    int out = -1;
    for (int d = 0; d < ndone && out < 0; d++)
      if (done[d].x == x && done[d].axis == axis && done[d].how == how) out = done[d].out;
    if (out < 0) {
      int first = g->nnodes;
      Builder b = {g, mm, kiln_fmt("%s.act", mm->name ? mm->name : "matmul"), cval, cid, &nc};
      out = rounded(&b, x, how, axis);
      done[ndone++] = (Done){x, axis, out, first, g->nnodes, i, how};
    }
    mm->in[as] = out;
  }
  if (!ndone) return;
  int *host = kiln_alloc(sizeof(int) * (size_t)(g->nnodes - n0));
  for (int d = 0; d < ndone; d++)
    for (int k = done[d].first; k < done[d].end; k++) host[k - n0] = done[d].host;
  graph_move_before(g, n0, host);
  pass_dce(g);   /* the use counts memplan frees by: the products now read the rounded values */
}
