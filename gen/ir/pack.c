/*
 * pack.c — pass_pack: weights stored in the layout the C matmul kernel reads.
 *
 * The generated matmul (templates/c/gemm_lib.c.tmpl) walks its right-hand matrix B (K x N)
 * in panels of KILN_PANEL columns, K rows each. A runtime that loads weights has to copy a
 * weight into that layout on every call or keep a second copy; an ahead-of-time compiler
 * can simply store it that way. So a rank-2 f32 WEIGHT whose every use, in every entry of
 * the program, is as the B side of a matmul read the same way gets a panel layout in the
 * weights payload (Node.pack): panel p holds rows k = 0..K-1 of columns 32p..32p+31,
 * zero past N. A weight stored as B^T may also be the table of gathers along axis 0 (a tied
 * embedding and classifier): row i is then lane i % 32 of panel i / 32, which the C gather
 * reads in place (templates/c/gather_packed.c.tmpl), so the classifier needs no copy.
 * Convolution filters that run as a matrix product are stored the same way in blocks of
 * KILN_CONV_BLOCK filters (tap-major), those of a small image's convolution in panels of 32
 * (the filters across the lanes: lanes_fit), and those of a 3x3 convolution that
 * Winograd's F(2x2, 3x3) serves as their 16 transformed matrices (wino_panels, below).
 * The values stay the logical tensor (node_data: the interpreter and Core ML read that);
 * weights.c writes node_panels() instead, made as it writes each tensor.
 *
 * B is the weight y of matmul(x, y), read transposed when trans_y (a PyTorch Linear
 * weight [N, K]); or the weight x of a matrix-vector product matmul(W, v) with N < 4
 * columns, which the kernel computes transposed (out^T = v^T W^T) so that W's long side
 * runs along the panels. Metal shares the C weights file and reads f32 weights row-major,
 * so a build with the Metal target packs no f32 weight (Program.no_pack); KILN_NOPACK=1 does
 * the same (for comparing the two layouts). A stored format (pass_quant) has one panel
 * layout that both targets read.
 */
#include "kiln.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Narrower B stays as it is: a panel of 32 columns would hold it 4x over or more. From 8
 * columns up it is packed, padded to a panel: a classifier's 512 -> 10 Linear then took 0.51
 * of the time it took copied at every call on 64 rows, and 0.22 on one row (bench/ab.py;
 * MLP batch 64 0.98 / 0.97 at 1 / 2 threads), for 44 KB more weights. */
enum { PACK_MIN_N = 8 };

/* How matmul node n reads its operand slot (0 = x, 1 = y) as B, or false when it does not
 * read it as B. *k, *n and *t: B's rows, columns, and whether the stored weight is B^T. */
static bool b_role(Graph *g, const Node *mm, int slot, int64_t *k, int64_t *n, bool *t) {
  if (mm->op != OP_MATMUL || mm->dead) return false;
  const Node *x = graph_node(g, mm->in[0]), *y = graph_node(g, mm->in[1]);
  if (x->dtype != DT_F32 || y->dtype != DT_F32) return false;
  MatmulShape s = matmul_shape(g, mm);
  bool swapped = matmul_swapped(&s);
  if (slot == 1 && !swapped && y->shape.rank == 2) {
    *k = s.k, *n = s.n, *t = mm->a.trans_y;
    return true;
  }
  if (slot == 0 && swapped && x->shape.rank == 2) {   /* B' = x^T: (k, m) = x[m][k] */
    *k = s.k, *n = s.m, *t = !mm->a.trans_x;
    return true;
  }
  return false;
}

/* Calls visit(h, u, slot, arg) for every use of WEIGHT w (by name) as operand slot of a
 * live node u, in every entry h of w's program (or in g alone), until visit returns false;
 * returns how many uses it visited, or -1 when visit refused one. */
typedef bool UseFn(Graph *h, const Node *u, int slot, void *arg);
static int each_use(Graph *g, const Node *w, UseFn *visit, void *arg) {
  Program *p = g->prog;
  int ng = p ? p->nentries : 1, uses = 0;
  for (int e = 0; e < ng; e++) {
    Graph *h = p ? p->entries[e] : g;
    for (int i = 0; i < h->nnodes; i++) {
      Node *u = h->nodes[i];
      if (u->dead) continue;
      for (int j = 0; j < u->nin; j++) {
        const Node *in = graph_node(h, u->in[j]);
        if (in->op != OP_WEIGHT || strcmp(in->name, w->name) != 0) continue;
        if (!visit(h, u, j, arg)) return -1;
        uses++;
      }
    }
  }
  return uses;
}

typedef struct {
  int uses, gathers;
  int64_t k, n;
  bool t, conv;   /* conv: the uses are convolutions' filters */
  bool wino;      /* ... each of them one that Winograd's F(2x2, 3x3) serves (wino_fit) */
  bool lanes;     /* ... each of them one whose filters go across the lanes (lanes_fit) */
} BUse;

/* Whether convolution u (whose filters are w) runs by Winograd's F(2x2, 3x3): 3x3 taps at
 * stride and dilation 1, one group, KILN_WINO_MIN_CHANNELS in and out, KILN_WINO_MIN_PIXELS
 * output pixels, f32. */
static bool wino_fit(Graph *h, const Node *u, const Node *w) {
  const Attrs *a = &u->a;
  return !(h->prog && h->prog->no_wino) && a->groups == 1 && w->shape.dim[2] == 3 && w->shape.dim[3] == 3 &&
         a->stride[0] == 1 && a->stride[1] == 1 && a->dilation[0] == 1 && a->dilation[1] == 1 && a->pad[0] >= 0 &&
         a->pad[1] >= 0 && w->shape.dim[0] >= KILN_WINO_MIN_CHANNELS && w->shape.dim[1] >= KILN_WINO_MIN_CHANNELS &&
         u->shape.dim[2] * u->shape.dim[3] >= KILN_WINO_MIN_PIXELS;
}

/* Output pixels a row needs for the lanes path (shorter rows make tiles of too few sums),
 * and taps a filter (C * KH * KW): over fewer, a tile's fixed costs and the transposed store
 * outweigh the lanes it fills (ResNet-18's 1 x 1 projections, 128 and 256 taps: 3-10 %
 * slower than the grid's tiles, measured). */
enum { LANES_MIN_ROW = 4, LANES_MIN_TAPS = 512 };

/* n rounded up to whole panels of KILN_PANEL. */
static int64_t whole_panels(int64_t n) { return (n + KILN_PANEL - 1) / KILN_PANEL * KILN_PANEL; }

/* Whether convolution u (filters w, not Winograd's) runs with its filters across the vector
 * lanes (templates/c/lanes_lib.c.tmpl) rather than its pixels (the padded grid's tiles of 32
 * pixels, conv_pad.c.tmpl): one group, the padded grid's bounds (no cropping, at most
 * KILN_GRID_TAPS taps), rows of LANES_MIN_ROW to KILN_LANES_PIXELS pixels, a panel of
 * filters or more of LANES_MIN_TAPS taps or more, and the filters fill more of their panels
 * of 32 than the grid's pixels fill theirs (ResNet-18's 7 x 7 stage: 512 of 512 lanes against
 * 49 of 64). Large images too: its 28 x 28 stride-2 convolution took 0.87-0.92 of the grid's
 * time at 1 and 2 threads, a 56 x 56 one 0.95 and 0.89 (bench/ab.py, --no-winograd). */
static bool lanes_fit(const Node *u, const Node *w) {
  const Attrs *a = &u->a;
  const int64_t oc = u->shape.dim[1], oh = u->shape.dim[2], ow = u->shape.dim[3];
  const int64_t kh = w->shape.dim[2], kw = w->shape.dim[3];
  if (a->groups != 1 || a->pad[0] < 0 || a->pad[1] < 0 || kh * kw > KILN_GRID_TAPS || ow < LANES_MIN_ROW || oh < 1 ||
      ow > KILN_LANES_PIXELS || oc < KILN_PANEL || w->shape.dim[1] * kh * kw < LANES_MIN_TAPS)
    return false;
  const int64_t wq = ow + (kw - 1) * a->dilation[1] / a->stride[1], grid = (oh - 1) * wq + ow;
  return oc * whole_panels(grid) > oh * ow * whole_panels(oc);   /* oc / its lanes > pixels / theirs */
}

/* A use as the filters of a convolution that runs as a matrix product (conv_gemm, from
 * KILN_CONV_GEMM_MIN_OCG filters a group), one group or groups of whole blocks of
 * KILN_CONV_BLOCK filters: counted in BUse.uses as B^T (n = OC, k = CG * KH * KW) with
 * BUse.conv set, so a weight is packed for convolutions only when every use is one. */
static bool conv_use(Graph *h, const Node *u, int slot, BUse *b) {
  const Node *x = graph_node(h, u->in[0]), *w = graph_node(h, u->in[1]);
  if (slot != 1 || x->dtype != DT_F32 || w->dtype != DT_F32 || w->shape.rank != 4 || u->a.groups < 1) return false;
  int64_t ocg = u->shape.dim[1] / u->a.groups, k = w->shape.dim[1] * w->shape.dim[2] * w->shape.dim[3];
  if (ocg < KILN_CONV_GEMM_MIN_OCG || (u->a.groups > 1 && ocg % KILN_CONV_BLOCK)) return false;
  if (b->uses++ && (k != b->k || w->shape.dim[0] != b->n || !b->conv)) return false;
  b->wino = (b->uses == 1 || b->wino) && wino_fit(h, u, w);
  b->lanes = (b->uses == 1 || b->lanes) && !wino_fit(h, u, w) && lanes_fit(u, w);
  b->k = k, b->n = w->shape.dim[0], b->t = true, b->conv = true;
  return true;
}

/* A use read as B the same way as the ones before it (BUse), or as the table of a gather
 * along axis 0 (counted in gathers: a tied embedding and classifier, whose row i is lane
 * i % 32 of panel i / 32 when the weight is B^T; templates/c/gather_packed.c.tmpl). */
static bool b_use(Graph *h, const Node *u, int slot, void *arg) {
  BUse *b = arg;
  int64_t k, n;
  bool t;
  if (u->op == OP_GATHER && slot == 0 && u->a.axis == 0) {
    b->gathers++;
    return true;
  }
  if (u->op == OP_CONV2D) return conv_use(h, u, slot, b);
  if (!b_role(h, u, slot, &k, &n, &t)) return false;
  if (b->uses++ && (k != b->k || n != b->n || t != b->t || b->conv)) return false;
  b->k = k, b->n = n, b->t = t;
  return true;
}

/* Whether WEIGHT w (by name) is read as B the same way by every use in every entry of
 * w's program (or of g alone), or as the rows of B^T by gathers; sets *k, *n, *t from the
 * matmul uses. */
static bool packable(Graph *g, const Node *w, int64_t *k, int64_t *n, bool *t, bool *conv, bool *wino, bool *lanes) {
  BUse b = {0};
  if (each_use(g, w, b_use, &b) <= 0 || !b.uses || (b.gathers && (!b.t || b.conv))) return false;
  *k = b.k, *n = b.n, *t = b.t, *conv = b.conv, *wino = b.conv && b.wino, *lanes = b.conv && b.lanes;
  return true;
}

/* Contract in kiln.h. */
MatmulShape matmul_shape(Graph *g, const Node *mm) {
  const Node *x = graph_node(g, mm->in[0]);
  int r = mm->shape.rank;
  return (MatmulShape){.m = mm->shape.dim[r - 2], .n = mm->shape.dim[r - 1],
                       .k = mm->a.trans_x ? x->shape.dim[x->shape.rank - 2] : x->shape.dim[x->shape.rank - 1]};
}

/* Contract in kiln.h: a product with under 4 columns and 32 or more rows. */
bool matmul_swapped(const MatmulShape *s) { return s->n < 4 && s->m >= KILN_PANEL; }

static bool pack_disabled(const Graph *g) {
  const char *e = getenv("KILN_NOPACK");
  return (g->prog && g->prog->no_pack) || (e && strcmp(e, "1") == 0);
}

/* Contract in kiln.h. Leaves every node as it was except Node.pack of f32 rank-2 WEIGHTs
 * (and pack_t): set iff the weight is read as B the same way everywhere; and of rank-4
 * convolution filters (KILN_CONV_BLOCK, pack_t): set iff every use is a convolution
 * that runs as a matrix product, and Node.wino with it iff every such use is one that
 * Winograd's F(2x2, 3x3) serves (wino_fit); KILN_PANEL instead iff every such use runs with
 * its filters across the lanes (lanes_fit). Deterministic: depends only on the graphs. */
void pass_pack(Graph *g) {
  bool off = pack_disabled(g);
  for (int i = 0; i < g->nnodes; i++) {
    Node *w = g->nodes[i];
    w->pack = 0, w->wino = false;
    if (off || w->dead || w->op != OP_WEIGHT || w->dtype != DT_F32 || (w->shape.rank != 2 && w->shape.rank != 4) || !w->name ||
        w->wfmt != WF_F32)
      continue;
    int64_t k = 0, n = 0;
    bool t = false, conv = false, wino = false, lanes = false;
    if (!packable(g, w, &k, &n, &t, &conv, &wino, &lanes) || (!conv && n < PACK_MIN_N)) continue;
    w->pack = conv && !lanes ? KILN_CONV_BLOCK : KILN_PANEL;
    w->pack_t = t;
    w->wino = wino;
  }
}

/* ---- pass_quant: the stored format of each matrix weight ---- */

/* Whether node u reads its operand slot (a rank-2 WEIGHT) row by row, a row being what u
 * reduces over or copies out: as B^T of a matmul (a Linear's [N, K], or the W of W v), or
 * as the table of a gather along axis 0 (an embedding). Those are the reads the C
 * kernels of a stored format serve (templates/c/quant_lib.c.tmpl). */
static bool row_role(Graph *h, const Node *u, int slot) {
  if (u->dead) return false;
  if (u->op == OP_GATHER) return slot == 0 && u->a.axis == 0;
  int64_t k, n;
  bool t;
  return b_role(h, u, slot, &k, &n, &t) && t;
}

static bool row_use(Graph *h, const Node *u, int slot, void *arg) {
  (void)arg;
  return row_role(h, u, slot);
}

/* The format the rules ask for w: the first --quantize rule that matches its name (its
 * index in *rule, else -1); a rule without a name pattern applies only to weights the file
 * holds as f32, f16 or bf16 (an already quantized tensor is not quantized again unless a
 * rule names it). No match: as the file stores it. */
static WFormat wanted(const Program *p, const Node *w, int *rule) {
  bool floaty = w->src_fmt == WF_F32 || w->src_fmt == WF_F16 || w->src_fmt == WF_BF16;
  for (int i = 0; p && i < p->nqrules; i++) {
    const QuantRule *r = &p->qrules[i];
    if (r->glob && fnmatch(r->glob, w->name, 0) != 0) continue;
    if (!r->glob && !floaty) continue;
    *rule = i;
    return r->keep ? w->src_fmt : r->fmt;
  }
  *rule = -1;
  return w->src_fmt;
}

/* Why weight w cannot be stored as f in graph g (NULL: it can), in a few words for a
 * build note: formats hold matrices read by row whose rows are whole blocks. */
static const char *unfit(Graph *g, const Node *w, WFormat f) {
  if (w->shape.rank != 2) return kiln_fmt("rank %d, not a matrix", w->shape.rank);
  if (w->dtype != DT_F32) return "not a float tensor";
  int64_t k = w->shape.dim[1];
  int block = wformat_info(f)->block;
  if (block && k % block)
    return kiln_fmt("rows of %lld values, not whole %s blocks of %d", (long long)k, wformat_info(f)->name, block);
  if (each_use(g, w, row_use, NULL) <= 0) return "read other than by rows";
  return NULL;
}

/* The same weight as w, live, in an entry already done (entries share parameters by name). */
static const Node *done_before(const Graph *g, const Node *w) {
  const Program *p = g->prog;
  for (int e = 0; p && e < p->nentries && p->entries[e] != g; e++) {
    const Graph *h = p->entries[e];
    for (int i = 0; i < h->nnodes; i++) {
      const Node *x = h->nodes[i];
      if (!x->dead && x->op == OP_WEIGHT && x->name && strcmp(x->name, w->name) == 0) return x;
    }
  }
  return NULL;
}

/* Contract in kiln.h. A rank-2 WEIGHT that every use reads by row (row_role) and whose
 * rows are a whole number of its format's blocks gets Node.wfmt = wanted(); nothing is
 * quantized here: node_stored makes the panels (the file's own bits re-laid when it
 * stores that format, else quantized) as the writer streams them, and node_data gives
 * the values the kernels compute with (so the interpreter and Core ML see exactly those).
 * Every other weight is f32. A weight another entry already did takes its format.
 * Program.no_pack does not matter here: the Metal target reads the same panels as C
 * (templates/metal/deq/). */
void pass_quant(Graph *g) {
  Program *p = g->prog;
  for (int i = 0; i < g->nnodes; i++) {
    Node *w = g->nodes[i];
    if (w->dead || w->op != OP_WEIGHT || !w->name) continue;
    w->wfmt = WF_F32;
    const Node *prev = done_before(g, w);
    if (prev) {   /* made as prev's are: same panels, same values (and counted there) */
      if (w->dtype == DT_F32 && w->shape.rank == 2)
        w->wfmt = prev->wfmt, w->src_fmt = prev->src_fmt, w->src_raw = prev->src_raw;
      continue;
    }
    int rule;
    WFormat f = wanted(p, w, &rule);
    const char *why = f == WF_F32 ? NULL : unfit(g, w, f);
    if (f != WF_F32 && !why) w->wfmt = f;
    if (rule < 0 || !p->qrule_use) continue;
    QuantRuleUse *u = &p->qrule_use[rule];
    u->reached++;
    if (why && !u->unfit++) u->example = w->name, u->why = why;
  }
}

/* Contract in kiln.h. Rules without a pattern are left out: "every matrix that fits" is
 * what they mean. */
void quant_rule_notes(const Program *p, FILE *f) {
  for (int i = 0; p->qrule_use && i < p->nqrules; i++) {
    const QuantRule *r = &p->qrules[i];
    const QuantRuleUse *u = &p->qrule_use[i];
    if (!r->glob) continue;
    if (!u->reached)
      fprintf(f, "kiln: note: --quantize %s reaches no weight (no name matches it, or an earlier rule takes them)\n",
              esc_message(r->text));
    else if (u->unfit == 1 && u->reached == 1)
      fprintf(f, "kiln: note: --quantize %s: the weight it reaches stays f32: %s (%s)\n", esc_message(r->text),
              esc_message(u->example), esc_message(u->why));
    else if (u->unfit == u->reached)
      fprintf(f, "kiln: note: --quantize %s: the %d weights it reaches stay f32, e.g. %s (%s)\n", esc_message(r->text),
              u->unfit, esc_message(u->example), esc_message(u->why));
    else if (u->unfit)
      fprintf(f, "kiln: note: --quantize %s: %d of the %d weights it reaches stay%s f32, e.g. %s (%s)\n",
              esc_message(r->text), u->unfit, u->reached, u->unfit == 1 ? "s" : "", esc_message(u->example),
              esc_message(u->why));
  }
}

/* Contract in kiln.h. A packed convolution filter (rank 4, always B^T) is the matrix of
 * its OC rows of CG * KH * KW taps. */
void pack_dims(const Node *w, int64_t *k, int64_t *n) {
  const int64_t row = w->shape.rank == 4 ? w->shape.dim[1] * w->shape.dim[2] * w->shape.dim[3] : w->shape.dim[1];
  *k = w->pack_t ? row : w->shape.dim[0];
  *n = w->pack_t ? w->shape.dim[0] : row;
}

/* ---- Winograd F(2x2, 3x3) filters ----
 * A 3x3 filter g becomes the 4x4 tile U = G g G^T, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2;
 * 0 0 1], so that a 2x2 block of outputs is A^T (sum over channels of U . B^T d B) A for the
 * 4x4 block of input d around it (templates/c/wino_lib.c.tmpl): 16 multiply-adds a channel
 * where the direct product takes 36. Made here once, in double and rounded once, rather
 * than on every call. Stored as 16 matrices (one per value xi of the tile), each as blocks
 * of KILN_CONV_BLOCK filters, channel-major: U[xi] of filter o, channel c at
 * ((xi * OB + o / 12) * C + c) * 12 + o % 12, OB blocks (the last zero past OC). */

/* Bytes of w's transformed filters. */
static int64_t wino_bytes(const Node *w) {
  const int64_t blocks = (w->shape.dim[0] + KILN_CONV_BLOCK - 1) / KILN_CONV_BLOCK;
  return KILN_WINO_ALPHA * blocks * KILN_CONV_BLOCK * w->shape.dim[1] * (int64_t)sizeof(float);
}

/* Contract in kiln.h. */
int64_t node_stored_bytes(const Node *w) {
  if (w->op == OP_WEIGHT && w->wfmt != WF_F32) return wformat_bytes(w->wfmt, w->shape.dim[0], w->shape.dim[1]);
  if (!w->pack) return node_bytes(w);
  if (w->wino) return wino_bytes(w);
  int64_t k, n;
  pack_dims(w, &k, &n);
  return (n + w->pack - 1) / w->pack * w->pack * k * (int64_t)sizeof(float);
}

/* Rows [r0, r0 + nr) of weight w's f32 values: inside all when it is given, else read
 * into scratch (weight_rows), so a file's weight never needs a whole second copy. */
static const float *rows_of(const Node *w, const float *all, int64_t r0, int64_t nr, float *scratch) {
  if (all) return all + r0 * (w->shape.dim[0] ? node_numel(w) / w->shape.dim[0] : 0);
  weight_rows(w, r0, nr, scratch);
  return scratch;
}

/* bytes of zeroed heap (freed by the writer once the tensor is out), or a one-line error. */
static void *alloc_or_die(size_t bytes, const char *what, const Node *w) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) die("out of memory %s %s (%zu bytes)", what, w->name ? w->name : "?", bytes);
  return p;
}

/* Into out (wino_bytes): the transforms of filters [o0, o0 + n) at f (each C channels of
 * 3 x 3 taps), of `blocks` blocks in all. */
static void wino_filters(const float *f, int64_t o0, int64_t n, int64_t channels, int64_t blocks, float *out) {
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  for (int64_t o = o0; o < o0 + n; o++)
    for (int64_t c = 0; c < channels; c++) {
      const float *g = f + ((o - o0) * channels + c) * 9;
      double gt[3][4];   /* g G^T */
      for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) gt[i][b] = g[i * 3] * G[b][0] + g[i * 3 + 1] * G[b][1] + g[i * 3 + 2] * G[b][2];
      for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
          const int64_t xi = a * 4 + b, at = ((xi * blocks + o / KILN_CONV_BLOCK) * channels + c) * KILN_CONV_BLOCK;
          out[at + o % KILN_CONV_BLOCK] = (float)(G[a][0] * gt[0][b] + G[a][1] * gt[1][b] + G[a][2] * gt[2][b]);
        }
    }
}

/* w's transformed filters (wino_filters), a fresh buffer; a weight from a file is read a
 * block of filters at a time. */
static float *wino_panels(const Node *w) {
  const int64_t oc = w->shape.dim[0], channels = w->shape.dim[1];
  const int64_t blocks = (oc + KILN_CONV_BLOCK - 1) / KILN_CONV_BLOCK;
  float *out = alloc_or_die((size_t)wino_bytes(w), "transforming", w);
  const float *all = weight_has_rows(w) ? NULL : node_data(w);
  float *scratch = all ? NULL : alloc_or_die(sizeof(float) * (size_t)(KILN_CONV_BLOCK * channels * 9), "transforming", w);
  for (int64_t o0 = 0; o0 < oc; o0 += KILN_CONV_BLOCK) {
    const int64_t n = oc - o0 < KILN_CONV_BLOCK ? oc - o0 : KILN_CONV_BLOCK;
    wino_filters(rows_of(w, all, o0, n, scratch), o0, n, channels, blocks, out);
  }
  free(scratch);
  return out;
}

/* Floats of input transforms a band holds at most (1 MiB): the band and a block of
 * filters stay in a core's L2 while every block of filters runs over it. */
enum { WINO_BAND_FLOATS = 262144 };

/* Contract in kiln.h. */
WinoGeom wino_geom(Graph *g, const Node *conv) {
  const int64_t c = graph_node(g, conv->in[0])->shape.dim[1];
  WinoGeom q = {.th = (conv->shape.dim[2] + 1) / 2, .tw = (conv->shape.dim[3] + 1) / 2};
  const int64_t tiles = q.th * q.tw, per_panel = KILN_WINO_ALPHA * c * KILN_PANEL;
  const int64_t panels = WINO_BAND_FLOATS / per_panel > 1 ? WINO_BAND_FLOATS / per_panel : 1;
  q.band = tiles < panels * KILN_PANEL ? tiles : panels * KILN_PANEL;
  q.ldv = (q.band + KILN_PANEL - 1) / KILN_PANEL * KILN_PANEL;
  q.scratch = KILN_WINO_ALPHA * (c * q.ldv + KILN_WINO_SKEW) * (int64_t)sizeof(float);
  return q;
}

/* Contract in kiln.h. Element (k, j) of B sits at panel j / P, row k, lane j % P (P =
 * w->pack: 32, or KILN_CONV_BLOCK for convolution filters). The
 * weight is read along its own rows: when it is B^T, 32 of them (B's columns) fill one
 * panel; when it is B, each row r is spread over row r of every panel. A weight from a
 * file is read a few rows at a time (weight_has_rows), any other one materialised. */
float *node_panels(const Node *w) {
  if (w->wino) return wino_panels(w);
  int64_t k, n;
  pack_dims(w, &k, &n);
  const int64_t pw = w->pack;   /* lanes a panel */
  float *out = alloc_or_die((size_t)node_stored_bytes(w), "packing", w);
  const float *all = weight_has_rows(w) ? NULL : node_data(w);
  float *scratch = all ? NULL : alloc_or_die(sizeof(float) * (size_t)(w->pack_t ? pw * k : n), "packing", w);
  if (w->pack_t) {
    for (int64_t p = 0; p * pw < n; p++) {
      float *panel = out + p * k * pw;
      int64_t lanes = n - p * pw < pw ? n - p * pw : pw;
      const float *rows = rows_of(w, all, p * pw, lanes, scratch);
      for (int64_t l = 0; l < lanes; l++)
        for (int64_t r = 0; r < k; r++) memcpy(panel + r * pw + l, rows + l * k + r, sizeof(float));   /* the bits */
    }
  } else {
    for (int64_t r = 0; r < k; r++) {
      const float *row = rows_of(w, all, r, 1, scratch);
      for (int64_t p = 0; p * pw < n; p++) {
        int64_t lanes = n - p * pw < pw ? n - p * pw : pw;
        memcpy(out + (p * k + r) * pw, row + p * pw, sizeof(float) * (size_t)lanes);
      }
    }
  }
  free(scratch);
  return out;
}

/* A share of one weight's stored-format panels: [p0, p1) of them into q, from all (the
 * whole f32 tensor) or, when all is NULL, from weight_rows one panel of rows at a time. */
typedef struct {
  const Node *w;
  const float *all;
  unsigned char *q;
  int64_t p0, p1;
  float *rows;                  /* one panel's rows (when not all): allocated by the main thread */
} QuantJob;

/* Runs one QuantJob (a pthread start routine; also called directly). It allocates
 * nothing: a die() (which runs the atexit frees) must only ever come from the main thread. */
static void *quant_job(void *arg) {
  const QuantJob *j = arg;
  const Node *w = j->w;
  int64_t n = w->shape.dim[0], k = w->shape.dim[1], pb = wformat_panel_bytes(w->wfmt, k);
  for (int64_t p = j->p0; p < j->p1; p++) {
    int64_t nr = n - p * KILN_QPANEL < KILN_QPANEL ? n - p * KILN_QPANEL : KILN_QPANEL;
    const float *x = j->all ? j->all + p * KILN_QPANEL * k : j->rows;
    if (!j->all) weight_rows(w, p * KILN_QPANEL, nr, j->rows);
    quant_pack_into(w->wfmt, x, nr, k, NULL, j->q + p * pb);
  }
  return NULL;
}

/* A panel's rows for a QuantJob reading a file a panel at a time, else NULL. */
static float *job_rows(const Node *w, const float *all) {
  return all ? NULL : alloc_or_die(sizeof(float) * (size_t)(KILN_QPANEL * w->shape.dim[1]), "storing", w);
}

/* w's stored-format panels (a fresh buffer): the file's own bits re-laid when it stores
 * that format, else quantized — a weight from a file one panel of 32 rows at a time, any
 * other one from its whole values. Panels are independent (quant_pack's contract; tests/
 * quant: panels-pack-apart), so a second thread quantizes the second half of them: the
 * bytes cannot depend on it, and the K-quants cost 60-75 ns a weight on one core.
 * KILN_THREADS=1 keeps it to one thread; a thread that cannot start is done inline. */
static unsigned char *stored_panels(const Node *w) {
  int64_t n = w->shape.dim[0], k = w->shape.dim[1], np = (n + KILN_QPANEL - 1) / KILN_QPANEL;
  unsigned char *q = alloc_or_die((size_t)wformat_bytes(w->wfmt, n, k), "storing", w);   /* padding lanes stay zero */
  if (w->wfmt == w->src_fmt && !w->data) return quant_from_ggml_into(w->wfmt, w->src_raw, n, k, q);
  float *all = weight_has_rows(w) ? NULL : weight_load(w);
  const char *e = getenv("KILN_THREADS");
  bool two = np >= 2 && !(e && strcmp(e, "1") == 0);
  QuantJob jobs[2] = {{w, all, q, 0, two ? np / 2 : np, job_rows(w, all)}, {w, all, q, np / 2, np, job_rows(w, all)}};
  pthread_t t;
  bool started = two && pthread_create(&t, NULL, quant_job, &jobs[1]) == 0;
  quant_job(&jobs[0]);
  if (started) pthread_join(t, NULL);
  else if (two) quant_job(&jobs[1]);
  free(jobs[0].rows), free(jobs[1].rows), free(all);
  return q;
}

/* Contract in kiln.h. A stored format's panels and f32 panels are made here, into one
 * fresh buffer; an f32 weight kept as is is its values. */
const void *node_stored(const Node *w, bool *owned) {
  *owned = false;
  if (w->op == OP_WEIGHT && w->wfmt != WF_F32) {
    *owned = true;
    return stored_panels(w);
  }
  if (!w->pack) return node_data(w);
  *owned = true;
  return node_panels(w);
}
