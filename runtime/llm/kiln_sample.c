/*
 * kiln_sample.c — see kiln_sample.h.
 *
 * Order of the steps (that of llama.cpp's default chain and Hugging Face's logits
 * processors): penalties on the logits, then temperature, then the candidates sorted by
 * logit (ties: the lower id first, so the order never depends on the sort's stability),
 * top-k, softmax over what is left, top-p, min-p, renormalise, one draw: the first
 * candidate whose cumulative probability exceeds a uniform number in [0, 1).
 *
 * Reproducibility: the generator and every step are fixed. What can still differ between
 * platforms is expf in the softmax (glibc's is correctly rounded, others may differ in the
 * last bit), which moves a draw only when it lands within that bit of a boundary.
 */
#include "kiln_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PCG_DEFAULT_SEQ = 54 };

void kiln_rng_seed(kiln_rng *r, uint64_t seed, uint64_t seq) {
  r->state = 0;
  r->inc = seq << 1 | 1u;
  kiln_rng_u32(r);
  r->state += seed;
  kiln_rng_u32(r);
}

uint32_t kiln_rng_u32(kiln_rng *r) {
  uint64_t old = r->state;
  r->state = old * 6364136223846793005ULL + r->inc;
  uint32_t xorshifted = (uint32_t)(((old >> 18) ^ old) >> 27);
  uint32_t rot = (uint32_t)(old >> 59);
  return (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
}

float kiln_rng_float(kiln_rng *r) { return (float)(kiln_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

kiln_sampler_params kiln_sampler_defaults(void) {
  kiln_sampler_params p = {0};
  p.top_p = 1.0f;
  p.repetition_penalty = 1.0f;
  return p;
}

size_t kiln_sampler_scratch_size(int vocab) { return (size_t)vocab * (sizeof(kiln_candidate) + sizeof(uint16_t)); }

void kiln_sampler_init(kiln_sampler *s, int vocab, void *scratch, const kiln_sampler_params *p, uint64_t seed) {
  s->vocab = vocab;
  s->p = *p;
  s->cand = scratch;
  s->count = (uint16_t *)(s->cand + vocab);
  kiln_rng_seed(&s->rng, seed, PCG_DEFAULT_SEQ);
}

static void penalise(kiln_sampler *s, float *logits, const int *history, int n) {
  const kiln_sampler_params *p = &s->p;
  if (p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) return;
  int first = p->penalty_last_n > 0 && n > p->penalty_last_n ? n - p->penalty_last_n : 0;
  memset(s->count, 0, sizeof(uint16_t) * (size_t)s->vocab);
  for (int i = first; i < n; i++)
    if (history[i] >= 0 && history[i] < s->vocab && s->count[history[i]] < UINT16_MAX) s->count[history[i]]++;
  for (int t = 0; t < s->vocab; t++) {
    if (!s->count[t]) continue;
    float l = logits[t];
    if (p->repetition_penalty != 1.0f) l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
    l -= p->presence_penalty + p->frequency_penalty * (float)s->count[t];
    logits[t] = l;
  }
}

static int by_logit(const void *a, const void *b) {
  const kiln_candidate *x = a, *y = b;
  if (x->value != y->value) return x->value > y->value ? -1 : 1;   /* descending; a NaN sorts as neither */
  return x->id - y->id;
}

static int argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

int kiln_sample(kiln_sampler *s, float *logits, const int *history, int n) {
  const kiln_sampler_params *p = &s->p;
  penalise(s, logits, history, n);
  if (p->temperature <= 0.0f || p->top_k == 1) return argmax(logits, s->vocab);
  for (int t = 0; t < s->vocab; t++) logits[t] /= p->temperature;
  kiln_candidate *c = s->cand;
  for (int t = 0; t < s->vocab; t++) c[t] = (kiln_candidate){logits[t], t};
  qsort(c, (size_t)s->vocab, sizeof *c, by_logit);
  int keep = p->top_k > 0 && p->top_k < s->vocab ? p->top_k : s->vocab;
  float max = c[0].value, sum = 0.0f;
  for (int i = 0; i < keep; i++) sum += c[i].value = expf(c[i].value - max);
  float mass = 0.0f;
  int cut = keep;
  for (int i = 0; i < keep; i++) {
    c[i].value /= sum;
    if (i > 0 && (c[i].value < p->min_p * c[0].value || mass >= p->top_p)) {
      cut = i;
      break;
    }
    mass += c[i].value;
  }
  float total = 0.0f;
  for (int i = 0; i < cut; i++) total += c[i].value;
  float u = kiln_rng_float(&s->rng) * total, acc = 0.0f;
  for (int i = 0; i < cut; i++) {
    acc += c[i].value;
    if (u < acc) return c[i].id;
  }
  return c[cut - 1].id;   /* rounding left u at the very top */
}
