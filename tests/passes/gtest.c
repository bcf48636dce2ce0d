/*
 * gtest.c — builds small graphs through the C API (graph_add, graph_leaf) and
 * prints what the passes make of them, for tests/t_passes.sh to compare with
 * the golden files beside it. It compiles the compiler's own graph, pass and
 * interpreter sources (tests/passes/build.sh), so
 * it tests exactly the code `kiln` runs, without needing the Lua frontend.
 *
 *   gtest SCENARIO      prints the scenario's output (see the table at the end)
 *
 * The memory-plan checker (check_plan) recomputes liveness its own way, by
 * walking the schedule, and fails if two values live at the same time overlap.
 */
#include "kiln.h"

#include <stdlib.h>
#include <string.h>

#ifndef GTEST_FRONTEND
/* util.c looks templates up here; the passes need none. */
const struct KilnEmbedded {
  const char *name;
  const unsigned char *text;
  size_t len;
} kiln_embedded[] = {{NULL, NULL, 0}};
#endif

static Graph *g;
static int line;
static SrcLoc here(void) { return (SrcLoc){"t.lua", ++line}; }

static Shape shp(int rank, ...) {
  Shape s = {.rank = rank};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++) s.dim[i] = va_arg(ap, int);
  va_end(ap);
  return s;
}

static int input(const char *name, Shape s) { return graph_leaf(g, OP_INPUT, DT_F32, &s, name, here())->id; }

static int input_i32(const char *name, Shape s) { return graph_leaf(g, OP_INPUT, DT_I32, &s, name, here())->id; }

/* A weight filled with a deterministic ramp, so folding and interp results are checkable. */
static int weight(const char *name, Shape s) {
  Node *n = graph_leaf(g, OP_WEIGHT, DT_F32, &s, name, here());
  float *d = kiln_alloc((size_t)node_bytes(n));
  for (int64_t i = 0; i < node_numel(n); i++) d[i] = (float)(i % 7) * 0.25f - 0.5f;
  n->data = d;
  return n->id;
}

static int cnst(const float *v, Shape s) {
  Node *n = graph_leaf(g, OP_CONST, DT_F32, &s, NULL, here());
  n->data = memcpy(kiln_alloc((size_t)node_bytes(n)), v, (size_t)node_bytes(n));
  return n->id;
}

static int cnst_i32(const int32_t *v, Shape s) {
  Node *n = graph_leaf(g, OP_CONST, DT_I32, &s, NULL, here());
  n->data = memcpy(kiln_alloc((size_t)node_bytes(n)), v, (size_t)node_bytes(n));
  return n->id;
}

/* Adds a node or dies: for scenarios that expect success. */
static int op(OpKind k, const char *name, const Attrs *a, int nin, ...) {
  int in[8];
  va_list ap;
  va_start(ap, nin);
  for (int i = 0; i < nin; i++) in[i] = va_arg(ap, int);
  va_end(ap);
  char err[256];
  Node *n = graph_add(g, k, in, nin, a, here(), err, sizeof err);
  if (!n) {
    fprintf(stderr, "unexpected error: %s\n", err);
    exit(2);
  }
  n->name = name;
  return n->id;
}

/* Adds a node that must be rejected; prints the message. */
static void bad(OpKind k, const Attrs *a, int nin, ...) {
  int in[8];
  va_list ap;
  va_start(ap, nin);
  for (int i = 0; i < nin; i++) in[i] = va_arg(ap, int);
  va_end(ap);
  char err[256];
  int before = g->nnodes;
  Node *n = graph_add(g, k, in, nin, a, here(), err, sizeof err);
  if (n) printf("ACCEPTED %s : %s%s\n", kiln_ops[k].name, dtype_name(n->dtype), shape_str(&n->shape));
  else printf("%s\n", err);
  if (g->nnodes != before + (n != NULL)) printf("graph grew on a rejected node\n");
}

static void run_all(void) {
  for (int i = 0; i < kiln_npasses; i++) kiln_passes[i].run(g);
}

static void run_until(const char *last) {
  for (int i = 0; i < kiln_npasses; i++) {
    kiln_passes[i].run(g);
    if (strcmp(kiln_passes[i].name, last) == 0) return;
  }
}

/* ---- the plan checker ---- */

static int fails;
static void check(bool ok, const char *what, int id) {
  if (!ok) {
    printf("plan violation: %s (node %%%d)\n", what, id);
    fails++;
  }
}

static const Node *root(const Node *n) {
  while (n->op == OP_RESHAPE) n = g->nodes[n->in[0]];
  return n;
}

/* An arena value is live at kernel t from the kernel that makes it to its last reader. */
static bool live_at(int v, int t, const int *made, const int *lastuse) {
  const Node *n = g->nodes[v];
  if (n->dead || n->region != REG_ARENA || n->op == OP_RESHAPE || made[v] < 0) return false;
  return made[v] <= t && (t <= lastuse[v] || t == made[v]);
}

/* A fused kernel's nodes before its last live only inside it: no storage, one use,
 * by the next node of the kernel, not an output. */
static void check_fused(const Kernel *kr) {
  for (int j = 0; j + 1 < kr->nnodes; j++) {
    const Node *n = g->nodes[kr->nodes[j]], *next = g->nodes[kr->nodes[j + 1]];
    check(n->region == REG_NONE, "a fused intermediate has storage", n->id);
    check(n->nuses == 1, "a fused intermediate has more than one use", n->id);
    bool read = false;
    for (int i = 0; i < next->nin; i++) read |= next->in[i] == n->id;
    check(read, "a fused intermediate is not read by the next node of its kernel", n->id);
    for (int i = 0; i < g->noutputs; i++) check(g->outputs[i].node != n->id, "a fused intermediate is an output", n->id);
  }
}

/* Independent check of pass_memplan: alignment, bounds, views, weights disjoint, and
 * at every kernel, no two arena values still needed at that point overlap. A kernel
 * reads what earlier kernels made, and its own earlier nodes (fused). */
static void check_plan(void) {
  int nk = g->nkernels;
  int *lastuse = calloc((size_t)g->nnodes, sizeof(int)), *made = calloc((size_t)g->nnodes, sizeof(int));
  for (int i = 0; i < g->nnodes; i++) lastuse[i] = made[i] = -1;
  for (int k = 0; k < nk; k++) {
    const Node *n = g->nodes[g->kernels[k].nodes[g->kernels[k].nnodes - 1]];
    check(g->kernels[k].order == k, "kernel order is not its index", n->id);
    check_fused(&g->kernels[k]);
    made[n->id] = k;
    for (int j = 0; j < g->kernels[k].nnodes; j++) {
      const Node *m = g->nodes[g->kernels[k].nodes[j]];
      for (int i = 0; i < m->nin; i++) {
        const Node *r = root(g->nodes[m->in[i]]);
        bool inside = false;
        for (int q = 0; q < j; q++) inside |= g->kernels[k].nodes[q] == r->id;
        if (inside) continue;
        check(r->op == OP_INPUT || r->op == OP_WEIGHT || r->op == OP_CONST || r->op == OP_STATE ||
              (made[r->id] >= 0 && made[r->id] < k), "reads a value not yet computed", m->id);
        if (lastuse[r->id] < k) lastuse[r->id] = k;
      }
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (n->dead) continue;
    check(n->offset % KILN_ALIGN == 0 || n->op == OP_RESHAPE, "offset not 64-aligned", i);
    if (n->op == OP_RESHAPE) {
      const Node *r = root(n);
      check(n->region == r->region && n->offset == r->offset && n->io_slot == r->io_slot, "view not at its root", i);
    }
    if (n->region == REG_ARENA) check(n->offset >= 0 && n->offset + node_bytes(n) <= g->arena_size, "outside the arena", i);
    if (n->region == REG_WEIGHTS && n->op != OP_RESHAPE) {
      check(n->op == OP_WEIGHT || n->op == OP_CONST, "a computed value in the weights", i);
      check(n->offset + node_stored_bytes(n) <= (g->prog ? g->prog->weights_size : g->weights_size), "outside the weights", i);
      for (int j = 0; j < i; j++) {
        const Node *m = g->nodes[j];
        if (m->dead || m->region != REG_WEIGHTS || m->op == OP_RESHAPE) continue;
        if (!g->prog || g->prog->nentries == 1) check(m->offset + node_stored_bytes(m) <= n->offset, "weights not disjoint in node order", i);
        else if (m->offset == n->offset)   /* entries share slots: same offset, same bytes */
          check(node_bytes(m) == node_bytes(n) && memcmp(m->data, n->data, (size_t)node_bytes(n)) == 0,
                "two different tensors share a weights slot", i);
        else
          check(m->offset + node_stored_bytes(m) <= n->offset || n->offset + node_stored_bytes(n) <= m->offset, "weights overlap", i);
      }
    }
    if (n->region == REG_STATE) {
      check((n->op == OP_STATE || n->op == OP_WRITE || n->op == OP_RESHAPE) && g->prog, "a computed value in the state", i);
      const Node *r = root(n);
      if (g->prog) check(n->offset == g->prog->states[r->a.state].offset, "a state version away from its state", i);
    }
  }
  /* State order: every kernel reading a version straight from the state block runs
   * before the kernel of the write that replaces that version. */
  for (int i = 0; i < g->nnodes; i++) {
    const Node *w = g->nodes[i];
    if (w->dead || w->op != OP_WRITE) continue;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < g->kernels[k].nnodes; j++) {
        const Node *m = g->nodes[g->kernels[k].nodes[j]];
        for (int q = 0; q < m->nin; q++)
          if (root(g->nodes[m->in[q]])->id == w->in[0] && k != w->kernel)
            check(k < w->kernel, "a state version is read after the write that replaces it", m->id);
      }
  }
  for (int t = 0; t < nk; t++)
    for (int a = 0; a < g->nnodes; a++) {
      if (!live_at(a, t, made, lastuse)) continue;
      for (int b = a + 1; b < g->nnodes; b++) {
        if (!live_at(b, t, made, lastuse)) continue;
        const Node *x = g->nodes[a], *y = g->nodes[b];
        if (x->offset < y->offset + node_bytes(y) && y->offset < x->offset + node_bytes(x)) {
          printf("plan violation: %%%d [%lld, +%lld) and %%%d [%lld, +%lld) both live at kernel %d\n", a, (long long)x->offset,
                 (long long)node_bytes(x), b, (long long)y->offset, (long long)node_bytes(y), t);
          fails++;
        }
      }
    }
  free(lastuse);
  free(made);
}

/* ---- scenarios ---- */

static void ok(OpKind k, const Attrs *a, int nin, int i0, int i1, int i2) {
  int in[3] = {i0, i1, i2};
  char err[256];
  Node *n = graph_add(g, k, in, nin, a, here(), err, sizeof err);
  if (n) printf("%s : %s%s\n", kiln_ops[k].name, dtype_name(n->dtype), shape_str(&n->shape));
  else printf("REJECTED %s\n", err);
}

/* Shape rules: what they accept (with the result) and the message for what they reject. */
static void scenario_shapes(void) {
  int x23 = input("x23", shp(2, 2, 3)), x4 = input("x4", shp(1, 4)), x45 = input("x45", shp(2, 4, 5));
  int x345 = input("x345", shp(3, 3, 4, 5));
  Shape s2 = shp(1, 2);
  int i2 = graph_leaf(g, OP_INPUT, DT_I32, &s2, "i2", here())->id;
  int b23 = graph_leaf(g, OP_INPUT, DT_BOOL, &(Shape){2, {2, 3}}, "b23", here())->id;
  int img = input("img", shp(4, 1, 3, 8, 8)), w8433 = weight("w", shp(4, 8, 4, 3, 3));
  int w8133 = weight("w1", shp(4, 6, 1, 3, 3)), bias8 = weight("b6", shp(1, 6)), bias4 = weight("b4", shp(1, 4));
  int s = input("scalar", shp(0));
  Attrs a = {0};
  printf("-- accepted\n");
  ok(OP_ADD, NULL, 2, x23, s, 0);
  ok(OP_MUL, NULL, 2, input("c1", shp(2, 3, 1)), input("r1", shp(2, 1, 4)), 0);
  ok(OP_LT, NULL, 2, x23, x23, 0);
  ok(OP_WHERE, NULL, 3, b23, x23, s);
  ok(OP_MATMUL, NULL, 2, input("bm", shp(4, 2, 1, 3, 4)), input("bn", shp(3, 5, 4, 6)), 0);
  a.trans_x = true, a.trans_y = true;
  ok(OP_MATMUL, &a, 2, input("tx", shp(2, 4, 3)), input("ty", shp(2, 6, 4)), 0);
  a = (Attrs){.stride = {2, 1}, .pad = {1, 1, 1, 1}, .dilation = {1, 2}, .groups = 3};
  ok(OP_CONV2D, &a, 3, img, w8133, bias8);
  a = (Attrs){.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}};
  ok(OP_MAXPOOL2D, &a, 1, img, 0, 0);
  a = (Attrs){.kernel = {2, 2}, .stride = {2, 2}, .count_pad = true};
  ok(OP_AVGPOOL2D, &a, 1, img, 0, 0);
  a = (Attrs){.axes = 0x6, .keepdims = true};
  ok(OP_REDUCE_SUM, &a, 1, img, 0, 0);
  a = (Attrs){.axes = 0x3};
  ok(OP_REDUCE_MAX, &a, 1, x23, 0, 0);
  a = (Attrs){.axis = 1, .eps = 1e-5f};
  ok(OP_LAYERNORM, &a, 3, img, weight("g", shp(3, 3, 8, 8)), weight("be", shp(3, 3, 8, 8)));
  a = (Attrs){.eps = 1e-5f};
  int c3 = weight("c3", shp(1, 3));
  int bn[5] = {img, c3, c3, c3, c3};
  char err[256];
  Node *n = graph_add(g, OP_BATCHNORM, bn, 5, &a, here(), err, sizeof err);
  printf("batchnorm : %s\n", n ? shape_str(&n->shape) : err);
  a = (Attrs){.reshape = shp(3, 3, 1, 2)};
  ok(OP_RESHAPE, &a, 1, x23, 0, 0);
  a = (Attrs){.perm = {2, 0, 1}};
  ok(OP_TRANSPOSE, &a, 1, x345, 0, 0);
  a = (Attrs){.axis = 1};
  ok(OP_CONCAT, &a, 3, x23, x23, input("x25", shp(2, 2, 5)));
  a = (Attrs){.start = {0, 1}, .end = {2, 3}, .step = {1, 2}};
  ok(OP_SLICE, &a, 1, x23, 0, 0);
  a = (Attrs){.axis = 1};
  ok(OP_GATHER, &a, 2, x45, input_i32("ix", shp(2, 2, 2)), 0);
  a = (Attrs){.to = DT_I32};
  ok(OP_CAST, &a, 1, x23, 0, 0);
  ok(OP_COPY, NULL, 1, b23, 0, 0);
  printf("-- rejected\n");
  bad(OP_ADD, NULL, 2, x23, x4);
  bad(OP_ADD, NULL, 1, x23);
  bad(OP_CONCAT, NULL, 0);
  bad(OP_EXP, NULL, 1, i2);
  bad(OP_MATMUL, NULL, 2, x23, x45);
  bad(OP_MATMUL, NULL, 2, x4, x45);
  bad(OP_MATMUL, NULL, 2, input("bb1", shp(3, 2, 2, 3)), input("bb2", shp(3, 3, 3, 5)));
  a = (Attrs){.stride = {1, 1}, .dilation = {1, 1}, .groups = 1};
  bad(OP_CONV2D, &a, 2, img, w8433);
  a.groups = 3;
  bad(OP_CONV2D, &a, 3, img, w8133, bias4);
  a.groups = 2;
  bad(OP_CONV2D, &a, 2, img, w8133);
  a = (Attrs){.stride = {1, 1}, .dilation = {4, 4}, .groups = 3};
  bad(OP_CONV2D, &a, 2, img, w8133);
  a = (Attrs){.stride = {0, 1}, .dilation = {1, 1}, .groups = 3};
  bad(OP_CONV2D, &a, 2, img, w8133);
  a = (Attrs){.kernel = {2, 2}, .stride = {2, 2}, .pad = {2, 0, 0, 0}};
  bad(OP_MAXPOOL2D, &a, 1, img);
  a = (Attrs){.kernel = {9, 9}, .stride = {1, 1}};
  bad(OP_AVGPOOL2D, &a, 1, img);
  bad(OP_MAXPOOL2D, &a, 1, x23);
  a = (Attrs){.axes = 0x4};
  bad(OP_REDUCE_MEAN, &a, 1, x23);
  a = (Attrs){.axis = 2};
  bad(OP_SOFTMAX, &a, 1, x23);
  a = (Attrs){.axis = 1, .eps = 1e-5f};
  bad(OP_LAYERNORM, &a, 2, img, weight("g2", shp(1, 8)));
  a.eps = -1.0f;
  bad(OP_RMSNORM, &a, 1, img);
  a = (Attrs){.eps = 1e-5f};
  bn[2] = bias4;
  n = graph_add(g, OP_BATCHNORM, bn, 5, &a, here(), err, sizeof err);
  printf("%s\n", n ? "ACCEPTED batchnorm" : err);
  bad(OP_BATCHNORM, &a, 5, x4, x4, x4, x4, x4);
  bad(OP_WHERE, NULL, 3, x23, x23, x23);
  bad(OP_WHERE, NULL, 3, b23, x23, i2);
  a = (Attrs){.reshape = shp(2, 5, 1)};
  bad(OP_RESHAPE, &a, 1, x23);
  a = (Attrs){.reshape = shp(2, 6, 0)};
  bad(OP_RESHAPE, &a, 1, x23);
  a = (Attrs){.perm = {0, 0, 1}};
  bad(OP_TRANSPOSE, &a, 1, x45);
  a = (Attrs){.axis = 0};
  bad(OP_CONCAT, &a, 2, x23, x45);
  bad(OP_CONCAT, &a, 2, x23, b23);
  a = (Attrs){.start = {0, 2}, .end = {2, 4}, .step = {1, 1}};
  bad(OP_SLICE, &a, 1, x23);
  a = (Attrs){.start = {0, 2}, .end = {2, 2}, .step = {1, 1}};
  bad(OP_SLICE, &a, 1, x23);
  a = (Attrs){.start = {0, 0}, .end = {2, 3}, .step = {1, 0}};
  bad(OP_SLICE, &a, 1, x23);
  a = (Attrs){.axis = 0};
  bad(OP_GATHER, &a, 2, x23, x4);
  a = (Attrs){.axis = 2};
  bad(OP_GATHER, &a, 2, x23, i2);
  a = (Attrs){.to = (DType)7};
  bad(OP_CAST, &a, 1, x23);
}

/* The MLP of the README: every pass, then the dump with kernels and placement. */
static void scenario_mlp(void) {
  int x = input("image", shp(2, 1, 784));
  Attrs t = {.trans_y = true};
  int h = op(OP_MATMUL, "fc1", &t, 2, x, weight("fc1.weight", shp(2, 512, 784)));
  h = op(OP_ADD, "fc1", NULL, 2, h, weight("fc1.bias", shp(1, 512)));
  h = op(OP_RELU, "act", NULL, 1, h);
  h = op(OP_MATMUL, "fc2", &t, 2, h, weight("fc2.weight", shp(2, 10, 512)));
  h = op(OP_ADD, "fc2", NULL, 2, h, weight("fc2.bias", shp(1, 10)));
  graph_output(g, "logits", h);
  run_all();
  graph_dump(g, stdout);
  check_plan();
}

/* CSE merges equal constants, then the adds that read them; weights never merge;
 * DCE drops what no output reads but keeps the unused input. */
static void scenario_cse(void) {
  static const float v[4] = {1, 2, 3, 4};
  int x = input("x", shp(1, 4));
  input("unused", shp(1, 3));
  int a1 = op(OP_ADD, NULL, NULL, 2, x, cnst(v, shp(1, 4)));
  int a2 = op(OP_ADD, NULL, NULL, 2, x, cnst(v, shp(1, 4)));
  op(OP_EXP, "dead", NULL, 1, x);
  int m = op(OP_MUL, NULL, NULL, 2, a1, a2);
  int s1 = op(OP_ADD, NULL, NULL, 2, m, weight("w1", shp(1, 4)));
  int s2 = op(OP_ADD, NULL, NULL, 2, m, weight("w2", shp(1, 4)));
  Attrs r1 = {.reshape = shp(2, 2, 2)}, r2 = {.reshape = shp(2, 4, 1)};
  int v1 = op(OP_RESHAPE, NULL, &r1, 1, s1), v2 = op(OP_RESHAPE, NULL, &r1, 1, s1), v3 = op(OP_RESHAPE, NULL, &r2, 1, s1);
  graph_output(g, "y", op(OP_ADD, NULL, NULL, 2, s1, s2));
  graph_output(g, "p", v1);
  graph_output(g, "q", v2);
  graph_output(g, "r", v3);
  run_until("dce");
  printf("## after dce\n");
  graph_dump(g, stdout);
  pass_cse(g);
  printf("## after cse\n");
  graph_dump(g, stdout);
}

/* Folding: constant subgraphs become CONSTs (values shown), WEIGHTs stay. */
static void scenario_fold(void) {
  static const float c1[2] = {1, 2}, c2[2] = {3, 4}, five = 5;
  int x = input("x", shp(1, 2));
  int k1 = cnst(c1, shp(1, 2));
  int f = op(OP_MUL, "f", NULL, 2, k1, cnst(c2, shp(1, 2)));
  int r = op(OP_RELU, "r", NULL, 1, op(OP_SUB, NULL, NULL, 2, f, cnst(&five, shp(0))));
  graph_output(g, "y", op(OP_ADD, NULL, NULL, 2, x, r));
  graph_output(g, "z", op(OP_MUL, "wz", NULL, 2, weight("w", shp(1, 2)), k1));
  run_until("dce2");
  graph_dump(g, stdout);
}

/* Legalize: outputs that are an input, a weight, a constant, or storage another output
 * already claimed get a COPY; a view of a fresh value is written in place. */
static void scenario_legalize(void) {
  static const float one = 1;
  int x = input("x", shp(2, 2, 3));
  int w = weight("w", shp(2, 2, 3));
  int r = op(OP_RELU, "r", NULL, 1, x);
  Attrs rs = {.reshape = shp(2, 3, 2)}, flat = {.reshape = shp(1, 6)};
  int t = op(OP_TANH, "t", NULL, 1, x);
  graph_output(g, "same", x);
  graph_output(g, "wt", w);
  graph_output(g, "k", cnst(&one, shp(0)));
  graph_output(g, "r1", r);
  graph_output(g, "r2", r);
  graph_output(g, "rv", op(OP_RESHAPE, NULL, &rs, 1, r));
  graph_output(g, "tv", op(OP_RESHAPE, "tflat", &flat, 1, t));
  graph_output(g, "xv", op(OP_RESHAPE, NULL, &flat, 1, x));
  run_all();
  graph_dump(g, stdout);
  check_plan();
}

/* Kernel names: sanitised node names, _<op> then _2, _3 for repeats, op names for none.
 * Unfused: this chain would be one kernel. */
static void scenario_names(void) {
  g->no_fuse = true;
  int x = input("x", shp(1, 4));
  int h = op(OP_EXP, "layers.0.attn.q", NULL, 1, x);
  h = op(OP_ADD, "layers.0.attn.q", NULL, 2, h, x);
  h = op(OP_ADD, "layers.0.attn.q", NULL, 2, h, x);
  h = op(OP_ADD, "layers.0.attn.q", NULL, 2, h, x);
  h = op(OP_TANH, NULL, NULL, 1, h);
  h = op(OP_TANH, NULL, NULL, 1, h);
  h = op(OP_NEG, "0", NULL, 1, h);
  h = op(OP_NEG, "if", NULL, 1, h);
  h = op(OP_NEG, "a-b c", NULL, 1, h);
  graph_output(g, "y", h);
  run_until("schedule");
  for (int k = 0; k < g->nkernels; k++) printf("k%d %s\n", g->kernels[k].order, g->kernels[k].cname);
}

/* A chain of unary ops reuses two arena buffers in turn (unfused: fused, it is one kernel). */
static void scenario_chain(void) {
  g->no_fuse = true;
  int h = input("x", shp(2, 1, 1000));
  int64_t sum = 0;
  for (int i = 0; i < 12; i++) {
    h = op(OP_TANH, NULL, NULL, 1, h);
    sum += node_bytes(g->nodes[h]);
  }
  graph_output(g, "y", h);
  run_all();
  sum -= node_bytes(g->nodes[h]);   /* the last one is written into the output buffer */
  printf("arena %lld bytes for %lld bytes of intermediates\n", (long long)g->arena_size, (long long)sum);
  check_plan();
}

/* One line per kernel: order, name, its ops (anchor first) and where the result lives. */
static void print_kernels(const char *title) {
  printf("## %s\n", title);
  static const char *const region[] = {"none", "weights", "arena", "input", "output", "state"};
  for (int k = 0; k < g->nkernels; k++) {
    const Kernel *kr = &g->kernels[k];
    printf("k%d %s:", kr->order, kr->cname);
    for (int j = 0; j < kr->nnodes; j++) printf("%s %s", j ? " +" : "", kiln_ops[g->nodes[kr->nodes[j]]->op].name);
    printf(" -> %%%d %s\n", kr->nodes[kr->nnodes - 1], region[g->nodes[kr->nodes[kr->nnodes - 1]]->region]);
  }
}

/* Runs every pass on the graph built so far, prints its kernels, checks the plan,
 * and starts a fresh graph. */
static void fuse_case(const char *title) {
  run_all();
  print_kernels(title);
  check_plan();
  g = graph_new("t", "t.lua");
}

/* State: one entry of a program writes x into rows pos.. of a [4] state and reads the
 * state twice: new_sum after the write, and old_sum (and the output `old`, a view)
 * through a view of the version before the write, traced after the write. In-place
 * storage makes the traced order wrong: the schedule must run old_sum and the copy of
 * `old` (legalize) before the write. The interpreter, functional, shows the values the
 * in-place order has to reproduce, and the state it leaves. */
static void scenario_state(void) {
  Program *p = program_new("t", "t.lua");
  g = program_add_entry(p, "step");
  p->states = calloc(1, sizeof(StateDecl));
  p->states[0] = (StateDecl){"s", DT_F32, shp(1, 4), here(), 0};
  p->nstates = 1;
  p->state_size = KILN_ALIGN;
  int x = input("x", shp(1, 2)), pos = input_i32("pos", shp(0));
  Node *leaf = graph_leaf(g, OP_STATE, DT_F32, &p->states[0].shape, "s", here());
  leaf->a.state = 0;
  int v0 = leaf->id;
  int view = op(OP_RESHAPE, NULL, &(Attrs){.reshape = shp(2, 2, 2)}, 1, v0);
  int w = op(OP_WRITE, "s", &(Attrs){.axis = 0, .state = 0}, 3, v0, x, pos);
  graph_set_state_last(g, 0, w);
  int newsum = op(OP_REDUCE_SUM, NULL, &(Attrs){.axes = 0x1}, 1, w);
  int oldsum = op(OP_REDUCE_SUM, NULL, &(Attrs){.axes = 0x3}, 1, view);
  graph_output(g, "new_sum", newsum);
  graph_output(g, "old_sum", oldsum);
  graph_output(g, "old", view);
  run_all();
  print_kernels("state: old_sum and the copy of old before the write");
  check_plan();
  float s[4] = {1, 2, 3, 4}, xv[2] = {10, 20};
  int32_t at = 1;
  Tensor in[2] = {{DT_F32, shp(1, 2), xv}, {DT_I32, shp(0), &at}}, st = {DT_F32, shp(1, 4), s}, outs[3];
  char err[256];
  if (!interp_entry(g, in, &st, outs, err, sizeof err)) printf("error: %s\n", err);
  printf("interp: new_sum %g, old_sum %g, old %g %g %g %g, state %g %g %g %g\n", (double)*(float *)outs[0].data,
         (double)*(float *)outs[1].data, (double)((float *)outs[2].data)[0], (double)((float *)outs[2].data)[1],
         (double)((float *)outs[2].data)[2], (double)((float *)outs[2].data)[3], (double)s[0], (double)s[1], (double)s[2],
         (double)s[3]);
  at = 3;
  if (!interp_entry(g, in, &st, outs, err, sizeof err)) printf("error: %s\n", err);
  printf("state after the refused call %g %g %g %g\n", (double)s[0], (double)s[1], (double)s[2], (double)s[3]);
  free(p->states);
}

/* Fusion (pass_group): an anchor absorbs the chain of elementwise nodes after it
 * while the chained value has no other reader, keeps its shape and the result
 * keeps the anchor's dtype. */
static void scenario_fusion(void) {
  Attrs t = {.trans_y = true};
  /* nn.Linear + ReLU: one kernel, named after the matmul (and with Graph.no_fuse:
   * one op per kernel). Every node on a line of its own: argument evaluation order
   * would otherwise decide node ids. */
  for (int nofuse = 0; nofuse < 2; nofuse++) {
    g->no_fuse = nofuse;
    int x = input("x", shp(2, 4, 8));
    int w = weight("fc1.weight", shp(2, 16, 8));
    int h = op(OP_MATMUL, "fc1", &t, 2, x, w);
    int b = weight("fc1.bias", shp(1, 16));
    h = op(OP_ADD, "fc1", NULL, 2, h, b);
    graph_output(g, "y", op(OP_RELU, "act", NULL, 1, h));
    fuse_case(nofuse ? "linear relu, no_fuse: three kernels" : "linear relu: one kernel");
  }

  /* a value read twice stays a kernel result; each reader starts its own kernel */
  int x = input("x", shp(1, 6));
  int h = op(OP_RELU, "r", NULL, 1, x);
  int e = op(OP_EXP, "e", NULL, 1, h);
  int th = op(OP_TANH, "t", NULL, 1, h);
  graph_output(g, "y", op(OP_ADD, "s", NULL, 2, e, th));
  fuse_case("two uses: relu not fused; exp + add fused, reading tanh's kernel, scheduled first");

  /* an output is never fused away, even with one more reader */
  x = input("x", shp(1, 6));
  h = op(OP_TANH, "t", NULL, 1, x);
  graph_output(g, "y", h);
  graph_output(g, "z", op(OP_EXP, "e", NULL, 1, h));
  fuse_case("output: tanh and exp separate");

  /* the chained value may not be broadcast by its consumer; a view ends the chain */
  x = input("x", shp(1, 4));
  int big = input("big", shp(2, 3, 4));
  h = op(OP_EXP, "e", NULL, 1, x);
  graph_output(g, "y", op(OP_ADD, "a", NULL, 2, h, big));
  Attrs r = {.reshape = shp(2, 2, 2)};
  h = op(OP_TANH, "t", NULL, 1, x);
  h = op(OP_RESHAPE, NULL, &r, 1, h);
  graph_output(g, "z", op(OP_NEG, "n", NULL, 1, h));
  fuse_case("broadcast and view: nothing fused");

  /* dtype: a comparison may feed a where inside a chain; a trailing cast is cut off */
  static const float zero = 0;
  x = input("x", shp(1, 6));
  int m = input("m", shp(1, 6)), other = input("other", shp(1, 1)), z = cnst(&zero, shp(0));
  h = op(OP_SUB, "d", NULL, 2, x, m);
  int c = op(OP_GT, "g", NULL, 2, h, z);
  h = op(OP_WHERE, "w", NULL, 3, c, x, other);
  graph_output(g, "y", op(OP_CAST, "c", &(Attrs){.to = DT_I32}, 1, h));
  fuse_case("sub + gt + where fused, the cast to i32 its own kernel");

  /* other anchors: conv + relu, batchnorm + relu, layernorm + gelu, softmax * mask,
   * reduce + sqrt, residual add + relu */
  x = input("x", shp(4, 1, 2, 5, 5));
  int mask = input("mask", shp(2, 3, 1));
  int cw = weight("conv.weight", shp(4, 3, 2, 3, 3)), cb = weight("conv.bias", shp(1, 3));
  int bw[4] = {weight("bn.mean", shp(1, 3)), weight("bn.var", shp(1, 3)), weight("bn.gamma", shp(1, 3)),
               weight("bn.beta", shp(1, 3))};
  Attrs cv = {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1};
  int conv = op(OP_CONV2D, "conv", &cv, 3, x, cw, cb);
  conv = op(OP_RELU, "act", NULL, 1, conv);
  h = op(OP_BATCHNORM, "bn", &(Attrs){.eps = 1e-5f}, 5, conv, bw[0], bw[1], bw[2], bw[3]);
  h = op(OP_RELU, "act2", NULL, 1, h);
  h = op(OP_ADD, "res", NULL, 2, h, conv);
  h = op(OP_RELU, "act", NULL, 1, h);
  h = op(OP_LAYERNORM, "ln", &(Attrs){.axis = 3, .eps = 1e-5f}, 1, h);
  h = op(OP_GELU, "ln", NULL, 1, h);
  h = op(OP_SOFTMAX, "sm", &(Attrs){.axis = 3}, 1, h);
  h = op(OP_MUL, "mask", NULL, 2, h, mask);
  h = op(OP_REDUCE_MEAN, "rms", &(Attrs){.axes = 8}, 1, h);
  graph_output(g, "y", op(OP_SQRT, "rms", NULL, 1, h));
  fuse_case("anchors of every kind");
}

static uint64_t rng = 88172645463325252ull;
static int rnd(int n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (int)(rng % (uint64_t)n);
}

/* Random DAGs of mixed-size values with views and several outputs: the plan must hold. */
static void scenario_random(void) {
  int total_fails = 0;
  for (int trial = 0; trial < 40; trial++) {
    g = graph_new("r", "r.lua");
    int vals[300], nv = 0;
    vals[nv++] = input("x", shp(1, 64));
    vals[nv++] = weight("w", shp(1, 64));
    int steps = 20 + rnd(120);
    for (int s = 0; s < steps; s++) {
      int a = vals[nv - 1 - rnd(nv < 8 ? nv : 8)], b = vals[rnd(nv)];
      int k = rnd(6), v;
      if (k == 0) v = op(OP_ADD, NULL, NULL, 2, a, b);
      else if (k == 1) v = op(OP_MUL, NULL, NULL, 2, a, b);
      else if (k == 2) v = op(OP_TANH, NULL, NULL, 1, a);
      else if (k == 3) {
        Attrs r = {.reshape = shp(2, 8, 8)}, back = {.reshape = shp(1, 64)};
        v = op(OP_RESHAPE, NULL, &back, 1, op(OP_EXP, NULL, NULL, 1, op(OP_RESHAPE, NULL, &r, 1, a)));
      } else if (k == 4) {
        Attrs c = {.axis = 0};
        int big = op(OP_CONCAT, NULL, &c, 2, a, b);   /* [128] then back to [64]: different sizes */
        Attrs sl = {.start = {rnd(64)}, .end = {0}, .step = {1}};
        sl.end[0] = sl.start[0] + 64;
        v = op(OP_SLICE, NULL, &sl, 1, big);
      } else v = op(OP_SIGMOID, NULL, NULL, 1, b);
      vals[nv++] = v;
    }
    int nout = 1 + rnd(3);
    for (int o = 0; o < nout; o++) graph_output(g, kiln_fmt("y%d", o), vals[nv - 1 - rnd(nv < 10 ? nv : 10)]);
    run_all();
    fails = 0;
    check_plan();
    g->no_fuse = true;   /* and the same graph with one node per kernel */
    pass_group(g);
    pass_schedule(g);
    pass_memplan(g);
    check_plan();
    total_fails += fails;
    if (fails && getenv("GTEST_DUMP")) graph_dump(g, stdout);
  }
  printf("random plans: %s\n", total_fails ? "VIOLATIONS" : "ok");
}

static int wdata(const char *name, Shape s, const float *v) {
  Node *n = graph_leaf(g, OP_WEIGHT, DT_F32, &s, name, here());
  n->data = memcpy(kiln_alloc((size_t)node_bytes(n)), v, (size_t)node_bytes(n));
  return n->id;
}

/* Interpreter results on small hand-computed cases, printed for the golden file. */
static void scenario_interp(void) {
  static const float m23[6] = {1, 2, 3, 4, 5, 6}, m32[6] = {1, 0, 0, 1, 1, 1}, m32t[6] = {1, 0, 1, 0, 1, 1};
  static const float nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, neg9[9] = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
  static const float ones4[4] = {1, 1, 1, 1}, ten = 10, four[4] = {1, 2, 3, 4}, sm[2] = {0, 1.0986122886681098f};
  static const float r23[6] = {1, 5, 2, 7, 0, 3}, tab[6] = {1, 2, 3, 4, 5, 6}, cv[3] = {-1.7f, 2.9f, 0};
  static const float seq[6] = {0, 1, 2, 3, 4, 5}, c1[2] = {1, 2}, c2[4] = {3, 4, 5, 6}, gl[2] = {1, -1};
  static const float bnx[4] = {1, 2, 3, 4}, bnm[2] = {1, 2}, bnv[2] = {4, 0.25f}, bng[2] = {2, 1}, bnb[2] = {0, 1};
  static const int32_t idx[2] = {2, 0};
  int x23 = wdata("x23", shp(2, 2, 3), m23);
  graph_output(g, "matmul", op(OP_MATMUL, NULL, NULL, 2, x23, wdata("y32", shp(2, 3, 2), m32)));
  Attrs a = {.trans_y = true};
  graph_output(g, "matmul_ty", op(OP_MATMUL, NULL, &a, 2, x23, wdata("y23", shp(2, 2, 3), m32t)));
  a = (Attrs){.trans_x = true};
  graph_output(g, "matmul_tx", op(OP_MATMUL, NULL, &a, 2, wdata("xt", shp(2, 3, 2), m32t), wdata("y32b", shp(2, 3, 2), m32)));
  int img = wdata("img", shp(4, 1, 1, 3, 3), nine), k = wdata("k", shp(4, 1, 1, 2, 2), ones4), b = wdata("b", shp(1, 1), &ten);
  a = (Attrs){.stride = {1, 1}, .dilation = {1, 1}, .groups = 1};
  graph_output(g, "conv", op(OP_CONV2D, NULL, &a, 3, img, k, b));
  a = (Attrs){.stride = {2, 2}, .pad = {1, 1, 1, 1}, .dilation = {1, 1}, .groups = 1};
  graph_output(g, "conv_pad", op(OP_CONV2D, NULL, &a, 3, img, k, b));
  a = (Attrs){.stride = {1, 1}, .dilation = {2, 2}, .groups = 1};
  graph_output(g, "conv_dil", op(OP_CONV2D, NULL, &a, 2, img, k));
  a = (Attrs){.kernel = {2, 2}, .stride = {2, 2}, .pad = {1, 1, 1, 1}};
  graph_output(g, "maxpool", op(OP_MAXPOOL2D, NULL, &a, 1, wdata("neg", shp(4, 1, 1, 3, 3), neg9)));
  graph_output(g, "avgpool", op(OP_AVGPOOL2D, NULL, &a, 1, img));
  a.count_pad = true;
  graph_output(g, "avgpool_cp", op(OP_AVGPOOL2D, NULL, &a, 1, img));
  a = (Attrs){.axis = 0};
  graph_output(g, "softmax", op(OP_SOFTMAX, NULL, &a, 1, wdata("sm", shp(1, 2), sm)));
  a = (Attrs){.axis = 0};
  graph_output(g, "layernorm", op(OP_LAYERNORM, NULL, &a, 1, wdata("four", shp(1, 4), four)));
  graph_output(g, "rmsnorm", op(OP_RMSNORM, NULL, &a, 2, wdata("ones", shp(1, 4), ones4), wdata("four2", shp(1, 4), four)));
  a = (Attrs){.eps = 0};
  int bn[5] = {wdata("bnx", shp(2, 2, 2), bnx), wdata("bnm", shp(1, 2), bnm), wdata("bnv", shp(1, 2), bnv),
               wdata("bng", shp(1, 2), bng), wdata("bnb", shp(1, 2), bnb)};
  char err[256];
  graph_output(g, "batchnorm", graph_add(g, OP_BATCHNORM, bn, 5, &a, here(), err, sizeof err)->id);
  int r = wdata("r23", shp(2, 2, 3), r23);
  a = (Attrs){.axes = 2, .keepdims = true};
  graph_output(g, "reduce_max", op(OP_REDUCE_MAX, NULL, &a, 1, r));
  a = (Attrs){.axes = 3};
  graph_output(g, "reduce_mean", op(OP_REDUCE_MEAN, NULL, &a, 1, r));
  a = (Attrs){.axes = 1};
  graph_output(g, "reduce_sum", op(OP_REDUCE_SUM, NULL, &a, 1, r));
  a = (Attrs){.axis = 0};
  int t32 = wdata("tab", shp(2, 3, 2), tab);
  graph_output(g, "gather", op(OP_GATHER, NULL, &a, 2, t32, cnst_i32(idx, shp(1, 2))));
  a = (Attrs){.axis = 1};
  graph_output(g, "gather_ax1", op(OP_GATHER, NULL, &a, 2, t32, cnst_i32(idx + 1, shp(2, 1, 1))));
  int cvw = wdata("cv", shp(1, 3), cv);
  a = (Attrs){.to = DT_I32};
  graph_output(g, "cast_i32", op(OP_CAST, NULL, &a, 1, cvw));
  a = (Attrs){.to = DT_BOOL};
  graph_output(g, "cast_bool", op(OP_CAST, NULL, &a, 1, cvw));
  a = (Attrs){.perm = {1, 0}};
  graph_output(g, "transpose", op(OP_TRANSPOSE, NULL, &a, 1, x23));
  a = (Attrs){.start = {1}, .end = {6}, .step = {2}};
  graph_output(g, "slice", op(OP_SLICE, NULL, &a, 1, wdata("seq", shp(1, 6), seq)));
  a = (Attrs){.axis = 1};
  graph_output(g, "concat", op(OP_CONCAT, NULL, &a, 2, wdata("c1", shp(2, 2, 1), c1), wdata("c2", shp(2, 2, 2), c2)));
  int glw = wdata("gl", shp(1, 2), gl);
  graph_output(g, "gelu", op(OP_GELU, NULL, NULL, 1, glw));
  graph_output(g, "gelu_tanh", op(OP_GELU_TANH, NULL, NULL, 1, glw));
  int cond = op(OP_GT, NULL, NULL, 2, glw, wdata("zero", shp(0), seq));
  graph_output(g, "where", op(OP_WHERE, NULL, NULL, 3, cond, glw, wdata("ten", shp(0), &ten)));
  graph_output(g, "bcast_sub", op(OP_SUB, NULL, NULL, 2, wdata("col", shp(2, 2, 1), c1), wdata("row", shp(1, 3), four)));
  pass_verify(g);
  Tensor *outs = kiln_alloc(sizeof(Tensor) * (size_t)g->noutputs);
  if (!interp_graph(g, NULL, outs, err, sizeof err)) {
    printf("error: %s\n", err);
    return;
  }
  for (int i = 0; i < g->noutputs; i++) {
    printf("%s %s%s:", g->outputs[i].name, dtype_name(outs[i].dtype), shape_str(&outs[i].shape));
    for (int64_t j = 0; j < shape_numel(&outs[i].shape); j++) {
      if (outs[i].dtype == DT_F32) printf(" %.6g", (double)((float *)outs[i].data)[j]);
      else if (outs[i].dtype == DT_I32) printf(" %d", ((int32_t *)outs[i].data)[j]);
      else printf(" %d", ((uint8_t *)outs[i].data)[j]);
    }
    printf("\n");
  }
  /* a gather index out of range is an error naming the line */
  g = graph_new("t", "t.lua");
  static const int32_t badidx[1] = {3};
  graph_output(g, "bad", op(OP_GATHER, NULL, &(Attrs){.axis = 0}, 2, wdata("tab", shp(2, 3, 2), tab), cnst_i32(badidx, shp(1, 1))));
  if (!interp_graph(g, NULL, outs, err, sizeof err)) printf("error: %s\n", err);
}

#ifdef GTEST_FRONTEND
/* gtest plan SCRIPT...: traces each model with the real frontend, runs every pass
 * and checks the memory plan; prints one summary line per model. */
static int plan_models(int n, char **scripts) {
  for (int i = 0; i < n; i++) {
    FrontendOptions fo = {.script = scripts[i]};
    Program *p = frontend_trace(&fo);
    pipeline_run(p, NULL, stdout);
    for (int e = 0; e < p->nentries; e++) {
      g = p->entries[e];
      int before = fails;
      check_plan();
      int64_t inter = 0;
      for (int k = 0; k < g->nkernels; k++) {
        const Node *r = g->nodes[g->kernels[k].nodes[g->kernels[k].nnodes - 1]];
        if (r->region == REG_ARENA) inter += node_bytes(r);
      }
      const char *entry = program_is_plain(p) ? "" : kiln_fmt(" entry %s", g->entry);
      printf("%s%s: %d kernels, arena %lld bytes for %lld bytes of intermediates: %s\n", scripts[i], entry, g->nkernels,
             (long long)g->arena_size, (long long)inter, fails == before ? "plan ok" : "PLAN VIOLATED");
    }
  }
  return fails ? 1 : 0;
}
#endif

int main(int argc, char **argv) {
  static const struct { const char *name; void (*run)(void); } scenarios[] = {
      {"shapes", scenario_shapes}, {"mlp", scenario_mlp}, {"cse", scenario_cse}, {"fold", scenario_fold},
      {"legalize", scenario_legalize}, {"names", scenario_names}, {"chain", scenario_chain},
      {"random", scenario_random}, {"interp", scenario_interp}, {"fusion", scenario_fusion}, {"state", scenario_state},
  };
  atexit(kiln_free_all);
#ifdef GTEST_FRONTEND
  if (argc >= 2 && strcmp(argv[1], "plan") == 0) return plan_models(argc - 2, argv + 2);
#endif
  if (argc != 2) {
    fprintf(stderr, "usage: gtest SCENARIO\n");
    return 2;
  }
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
    if (strcmp(scenarios[i].name, argv[1]) == 0) {
      g = graph_new("t", "t.lua");
      scenarios[i].run();
      return fails ? 1 : 0;
    }
  fprintf(stderr, "gtest: no scenario %s\n", argv[1]);
  return 2;
}
