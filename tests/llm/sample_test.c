/*
 * sample_test.c — runtime/llm/kiln_sample.c, exact expectations (t_llm runs it under
 * ASan+UBSan). Prints "PASS sample/<name>" or "FAIL sample/<name>: why" per check.
 *
 *   pcg32        the generator's first outputs for seed 42, sequence 54 equal the published
 *                ones of PCG's reference demo (pcg32-demo: 0xa15c02b7 0x7b47f409 ...)
 *   greedy       temperature 0 and top_k 1 take the arg-max, the lowest id on a tie
 *   frequencies  200,000 draws at temperature 1 from logits ln(1), ln(2), ln(3), ln(4):
 *                each frequency within 5 standard deviations of 1/10, 2/10, 3/10, 4/10
 *   temperature  at temperature 0.5 the same logits give probabilities proportional to
 *                1, 4, 9, 16 (within 5 sigma)
 *   top_k/top_p/min_p  only the tokens each keeps are ever drawn, and all of them are
 *   penalties    repetition (CTRL: / p above 0, * p below), presence and frequency change
 *                the arg-max exactly as their formulas say; penalty_last_n limits them
 *   seeded       two samplers with the same seed draw the same 1,000 ids; another seed not
 */
#include "kiln_sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static void check(int ok, const char *name, const char *why) {
  if (ok) printf("PASS sample/%s\n", name);
  else printf("FAIL sample/%s: %s\n", name, why), failures++;
}

enum { V = 4 };
static kiln_sampler make(kiln_sampler_params p, uint64_t seed) {
  kiln_sampler s;
  kiln_sampler_init(&s, V, malloc(kiln_sampler_scratch_size(V)), &p, seed);
  return s;
}

static void counts(kiln_sampler_params p, int draws, long *c) {
  kiln_sampler s = make(p, 7);
  memset(c, 0, sizeof(long) * V);
  for (int i = 0; i < draws; i++) {
    float l[V] = {logf(1), logf(2), logf(3), logf(4)};
    c[kiln_sample(&s, l, NULL, 0)]++;
  }
  free(s.cand);
}

static int near(const long *c, const double *want, int draws) {
  for (int t = 0; t < V; t++) {
    double sd = sqrt(draws * want[t] * (1 - want[t])) + 1e-9;
    if (fabs((double)c[t] - draws * want[t]) > 5 * sd) return 0;
  }
  return 1;
}

int main(void) {
  kiln_rng r;
  kiln_rng_seed(&r, 42, 54);
  const uint32_t want[6] = {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu};
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= kiln_rng_u32(&r) == want[i];
  check(ok, "pcg32", "outputs differ from the PCG reference");

  kiln_sampler_params p = kiln_sampler_defaults();
  kiln_sampler g = make(p, 1);
  float tie[V] = {1, 3, 3, 2};
  check(kiln_sample(&g, tie, NULL, 0) == 1, "greedy", "not the lowest arg-max");
  p.temperature = 2;
  p.top_k = 1;
  kiln_sampler g1 = make(p, 1);
  float tie2[V] = {1, 3, 3, 2};
  check(kiln_sample(&g1, tie2, NULL, 0) == 1, "greedy_top_k1", "top_k 1 is not the arg-max");

  enum { N = 200000 };
  long c[V];
  p = kiln_sampler_defaults();
  p.temperature = 1;
  counts(p, N, c);
  check(near(c, (const double[]){0.1, 0.2, 0.3, 0.4}, N), "frequencies", "frequencies off");
  p.temperature = 0.5f;
  counts(p, N, c);
  check(near(c, (const double[]){1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0}, N), "temperature", "frequencies off");
  p.temperature = 1;
  p.top_k = 2;
  counts(p, N, c);
  check(!c[0] && !c[1] && near(c, (const double[]){0, 0, 3 / 7.0, 4 / 7.0}, N), "top_k", "wrong set or frequencies");
  p.top_k = 0;
  p.top_p = 0.65f;   /* 0.4 + 0.3 = 0.7 >= 0.65: tokens 3 and 2 */
  counts(p, N, c);
  check(!c[0] && !c[1] && c[2] && c[3], "top_p", "wrong set");
  p.top_p = 1;
  p.min_p = 0.5f;    /* keep p >= 0.2: tokens 1, 2, 3 */
  counts(p, N, c);
  check(!c[0] && c[1] && c[2] && c[3] && near(c, (const double[]){0, 2 / 9.0, 3 / 9.0, 4 / 9.0}, N), "min_p",
        "wrong set or frequencies");

  p = kiln_sampler_defaults();
  p.repetition_penalty = 2;
  kiln_sampler s = make(p, 1);
  float l1[V] = {2.0f, 1.5f, -1.0f, -1.2f};     /* seen 0 -> 1.0; unseen 1 stays 1.5 */
  int h1[] = {0};
  check(kiln_sample(&s, l1, h1, 1) == 1 && l1[0] == 1.0f, "repetition_positive", "2 / 2 should lose to 1.5");
  float l2[V] = {-1.0f, -1.9f, -5, -5};          /* seen 0 -> -2.0 < -1.9 */
  check(kiln_sample(&s, l2, h1, 1) == 1 && l2[0] == -2.0f, "repetition_negative", "-1 * 2 should lose to -1.9");
  p = kiln_sampler_defaults();
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  kiln_sampler pf = make(p, 1);
  float l3[V] = {3.0f, 2.1f, 0, 0};              /* 0 seen twice: 3 - 0.5 - 0.5 = 2.0 < 2.1 */
  int h3[] = {0, 2, 0};
  check(kiln_sample(&pf, l3, h3, 3) == 1 && l3[0] == 2.0f && l3[2] == -0.75f, "presence_frequency",
        "penalties computed wrong");
  p.penalty_last_n = 1;
  kiln_sampler pl = make(p, 1);
  float l4[V] = {3.0f, 2.1f, 0, 0};              /* only the last token (0) counts, once: 3 - 0.75 */
  check(kiln_sample(&pl, l4, h3, 3) == 0 && l4[0] == 2.25f && l4[2] == 0.0f, "penalty_last_n", "window ignored");

  p = kiln_sampler_defaults();
  p.temperature = 1;
  kiln_sampler a = make(p, 99), b = make(p, 99), d = make(p, 100);
  int same = 1, differ = 0;
  for (int i = 0; i < 1000; i++) {
    float la[V] = {0, 0.5f, 1, 1.5f}, lb[V] = {0, 0.5f, 1, 1.5f}, ld[V] = {0, 0.5f, 1, 1.5f};
    int x = kiln_sample(&a, la, NULL, 0), y = kiln_sample(&b, lb, NULL, 0), z = kiln_sample(&d, ld, NULL, 0);
    same &= x == y;
    differ |= x != z;
  }
  check(same && differ, "seeded", same ? "another seed drew the same ids" : "the same seed drew other ids");
  free(g.cand), free(g1.cand), free(s.cand), free(pf.cand), free(pl.cand), free(a.cand), free(b.cand), free(d.cand);
  return failures != 0;
}
