/*
 * plain_llama.c — the make-bench peer for Kiln's KV-cache decode: a plain, obviously
 * correct, scalar C implementation of a Llama forward pass with a key/value cache, one
 * token at a time, written here from the architecture (in the spirit of llama2.c's run.c;
 * no code taken from it). It is what a developer would write by hand, and what Kiln's
 * generated code must beat.
 *
 * Weights: bench/llm/prep.py's raw file — a header of int32 fields, then f32 arrays:
 *   magic 0x4b4c4c4d ("MLLK"), dim, hidden, layers, heads, kv_heads, vocab, ctx,
 *   rope_halves (0: rotate pairs (2i, 2i+1), Meta/llama2.c; 1: rotate halves, Hugging
 *   Face), tied (1: logits use the embedding), eps * 1e9 as int;
 *   embedding [vocab, dim], per layer: attn_norm [dim], wq [heads*hd, dim], wk, wv
 *   [kv*hd, dim], wo [dim, heads*hd], ffn_norm [dim], w1 [hidden, dim], w2 [dim, hidden],
 *   w3 [hidden, dim]; final norm [dim]; output [vocab, dim] unless tied; rope cos and sin
 *   [ctx, hd/2].
 *
 *   plain_llama WEIGHTS TOKENS_FILE POS REPS OUT_LOGITS
 * runs the tokens of TOKENS_FILE (int32) at positions 0..POS-1 to fill the cache, then
 * decodes token TOKENS[POS] at position POS REPS times (the same token at the same
 * position writes the same cache row, so every repetition is the same work), writes the
 * logits of that call to OUT_LOGITS and prints "us <median wall> <median cpu>" over the
 * reps. POS written as pT (p32) times a prefill instead: the T tokens at positions
 * 0..T-1, one after another (a plain loop has no batched prefill); the logits are the
 * last position's.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

typedef struct {
  int dim, hidden, layers, heads, kv_heads, vocab, ctx, rope_halves, tied;
  float eps;
  float *emb, *final_norm, *out, *cos, *sin;
  float **attn_norm, **wq, **wk, **wv, **wo, **ffn_norm, **w1, **w2, **w3;
  float *k_cache, *v_cache;                  /* [layers, ctx, kv_heads * hd] */
} Model;

static void die(const char *msg) {
  fprintf(stderr, "plain_llama: %s\n", msg);
  exit(1);
}

static float *take(float **p, size_t n) {
  float *r = *p;
  *p += n;
  return r;
}

static void load(Model *m, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open weights");
  int h[11];
  if (fread(h, sizeof(int), 11, f) != 11 || h[0] != 0x4b4c4c4d) die("not a prep.py weights file");
  m->dim = h[1], m->hidden = h[2], m->layers = h[3], m->heads = h[4], m->kv_heads = h[5], m->vocab = h[6];
  m->ctx = h[7], m->rope_halves = h[8], m->tied = h[9], m->eps = (float)(h[10] * 1e-9);
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f) - 11 * (long)sizeof(int);
  fseek(f, 11 * (long)sizeof(int), SEEK_SET);
  float *all = malloc((size_t)bytes);
  if (!all || fread(all, 1, (size_t)bytes, f) != (size_t)bytes) die("short weights file");
  fclose(f);
  int hd = m->dim / m->heads, kvd = m->kv_heads * hd;
  float *p = all;
  m->emb = take(&p, (size_t)m->vocab * m->dim);
  float ***fields[] = {&m->attn_norm, &m->wq, &m->wk, &m->wv, &m->wo, &m->ffn_norm, &m->w1, &m->w2, &m->w3};
  for (int i = 0; i < 9; i++) *fields[i] = malloc(sizeof(float *) * (size_t)m->layers);
  for (int l = 0; l < m->layers; l++) {
    m->attn_norm[l] = take(&p, (size_t)m->dim);
    m->wq[l] = take(&p, (size_t)m->heads * hd * m->dim);
    m->wk[l] = take(&p, (size_t)kvd * m->dim);
    m->wv[l] = take(&p, (size_t)kvd * m->dim);
    m->wo[l] = take(&p, (size_t)m->dim * m->heads * hd);
    m->ffn_norm[l] = take(&p, (size_t)m->dim);
    m->w1[l] = take(&p, (size_t)m->hidden * m->dim);
    m->w2[l] = take(&p, (size_t)m->dim * m->hidden);
    m->w3[l] = take(&p, (size_t)m->hidden * m->dim);
  }
  m->final_norm = take(&p, (size_t)m->dim);
  m->out = m->tied ? m->emb : take(&p, (size_t)m->vocab * m->dim);
  m->cos = take(&p, (size_t)m->ctx * hd / 2);
  m->sin = take(&p, (size_t)m->ctx * hd / 2);
  if ((char *)p - (char *)all != bytes) die("weights file size does not match its header");
  m->k_cache = calloc((size_t)m->layers * m->ctx * kvd, sizeof(float));
  m->v_cache = calloc((size_t)m->layers * m->ctx * kvd, sizeof(float));
}

static void rmsnorm(float *o, const float *x, const float *w, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  float s = 1.0f / sqrtf(ss / n + eps);
  for (int i = 0; i < n; i++) o[i] = x[i] * s * w[i];
}

/* o[r] = sum_c w[r, c] x[c] */
static void matvec(float *o, const float *w, const float *x, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    float acc = 0.0f;
    for (int c = 0; c < cols; c++) acc += w[(size_t)r * cols + c] * x[c];
    o[r] = acc;
  }
}

static void rope(float *v, int nheads, int hd, const float *c, const float *s, int halves) {
  for (int h = 0; h < nheads; h++) {
    float *x = v + h * hd;
    for (int i = 0; i < hd / 2; i++) {
      int a = halves ? i : 2 * i, b = halves ? i + hd / 2 : 2 * i + 1;
      float x0 = x[a], x1 = x[b];
      x[a] = x0 * c[i] - x1 * s[i];
      x[b] = x0 * s[i] + x1 * c[i];
    }
  }
}

/* One token at position pos: its keys and values into the cache, logits into out. */
static void forward(Model *m, int token, int pos, float *logits) {
  int d = m->dim, hd = d / m->heads, kvd = m->kv_heads * hd, group = m->heads / m->kv_heads;
  static float *x, *h, *q, *att, *o, *a, *b, *sc;
  if (!x) {
    x = malloc(sizeof(float) * d), h = malloc(sizeof(float) * d), q = malloc(sizeof(float) * d);
    att = malloc(sizeof(float) * d), o = malloc(sizeof(float) * d);
    a = malloc(sizeof(float) * m->hidden), b = malloc(sizeof(float) * m->hidden), sc = malloc(sizeof(float) * m->ctx);
  }
  memcpy(x, m->emb + (size_t)token * d, sizeof(float) * d);
  const float *c = m->cos + (size_t)pos * hd / 2, *s = m->sin + (size_t)pos * hd / 2;
  for (int l = 0; l < m->layers; l++) {
    float *kc = m->k_cache + ((size_t)l * m->ctx) * kvd, *vc = m->v_cache + ((size_t)l * m->ctx) * kvd;
    rmsnorm(h, x, m->attn_norm[l], d, m->eps);
    matvec(q, m->wq[l], h, d, d);
    matvec(kc + (size_t)pos * kvd, m->wk[l], h, kvd, d);
    matvec(vc + (size_t)pos * kvd, m->wv[l], h, kvd, d);
    rope(q, m->heads, hd, c, s, m->rope_halves);
    rope(kc + (size_t)pos * kvd, m->kv_heads, hd, c, s, m->rope_halves);
    for (int hh = 0; hh < m->heads; hh++) {
      const float *qh = q + hh * hd;
      int kv = hh / group;
      float mx = -INFINITY;
      for (int t = 0; t <= pos; t++) {
        float dot = 0.0f;
        for (int i = 0; i < hd; i++) dot += qh[i] * kc[(size_t)t * kvd + kv * hd + i];
        sc[t] = dot / sqrtf((float)hd);
        if (sc[t] > mx) mx = sc[t];
      }
      float sum = 0.0f;
      for (int t = 0; t <= pos; t++) sum += sc[t] = expf(sc[t] - mx);
      for (int i = 0; i < hd; i++) {
        float acc = 0.0f;
        for (int t = 0; t <= pos; t++) acc += sc[t] * vc[(size_t)t * kvd + kv * hd + i];
        att[hh * hd + i] = acc / sum;
      }
    }
    matvec(o, m->wo[l], att, d, d);
    for (int i = 0; i < d; i++) x[i] += o[i];
    rmsnorm(h, x, m->ffn_norm[l], d, m->eps);
    matvec(a, m->w1[l], h, m->hidden, d);
    matvec(b, m->w3[l], h, m->hidden, d);
    for (int i = 0; i < m->hidden; i++) a[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
    matvec(o, m->w2[l], a, d, m->hidden);
    for (int i = 0; i < d; i++) x[i] += o[i];
  }
  rmsnorm(h, x, m->final_norm, d, m->eps);
  matvec(logits, m->out, h, m->vocab, d);
}


int main(int argc, char **argv) {
  if (argc != 6) die("usage: plain_llama WEIGHTS TOKENS POS REPS OUT_LOGITS");
  Model m;
  load(&m, argv[1]);
  int prefill = argv[3][0] == 'p';
  int pos = atoi(argv[3] + prefill), reps = atoi(argv[4]);
  if (pos < 0 || pos >= m.ctx) die("position out of range");
  FILE *tf = fopen(argv[2], "rb");
  int *tokens = malloc(sizeof(int) * (size_t)(pos + 1));
  if (!tf || fread(tokens, sizeof(int), (size_t)pos + 1, tf) != (size_t)pos + 1) die("short tokens file");
  fclose(tf);
  float *logits = malloc(sizeof(float) * (size_t)m.vocab);
  if (!prefill)
    for (int p = 0; p < pos; p++) forward(&m, tokens[p], p, logits);
  double *t = malloc(sizeof(double) * (size_t)reps), *c = malloc(sizeof(double) * (size_t)reps);
  for (int r = 0; r < reps; r++) {
    double t0 = clock_us(CLOCK_MONOTONIC), c0 = clock_us(CLOCK_PROCESS_CPUTIME_ID);
    if (prefill)
      for (int p = 0; p < pos; p++) forward(&m, tokens[p], p, logits);
    else
      forward(&m, tokens[pos], pos, logits);
    t[r] = clock_us(CLOCK_MONOTONIC) - t0;
    c[r] = clock_us(CLOCK_PROCESS_CPUTIME_ID) - c0;
  }
  double wall = median(t, reps), cpu = median(c, reps);
  FILE *o = fopen(argv[5], "wb");
  if (!o || fwrite(logits, sizeof(float), (size_t)m.vocab, o) != (size_t)m.vocab) die("cannot write logits");
  fclose(o);
  printf("us %.3f %.3f\n", wall, cpu);
  return 0;
}
