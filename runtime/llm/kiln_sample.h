/*
 * kiln_sample.h — choosing the next token from a model's logits: greedy, temperature,
 * top-k, top-p (nucleus), min-p, and repetition / presence / frequency penalties, with a
 * seeded random generator whose algorithm is fixed, so a seed gives the same text
 * everywhere the same float math runs (see kiln_sample.c on what can still differ).
 *
 *   kiln_sampler s;
 *   kiln_sampler_params p = kiln_sampler_defaults();   p.temperature = 0.8f; p.top_p = 0.95f;
 *   void *scratch = malloc(kiln_sampler_scratch_size(VOCAB));
 *   kiln_sampler_init(&s, VOCAB, scratch, &p, 1234);
 *   int next = kiln_sample(&s, logits, history, nhistory);   // logits are overwritten
 *
 * No allocation: the caller gives the scratch memory. libc and libm only.
 */
#ifndef KILN_SAMPLE_H
#define KILN_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PCG32 (M. O'Neill, pcg-random.org, "pcg32_random_r"): 64-bit LCG state, output
 * XSH-RR. kiln_rng_seed(r, seed, seq) is pcg32_srandom_r(seed, seq). */
typedef struct {
  uint64_t state, inc;
} kiln_rng;
void kiln_rng_seed(kiln_rng *r, uint64_t seed, uint64_t seq);
uint32_t kiln_rng_u32(kiln_rng *r);
/* A float in [0, 1): the top 24 bits of one draw times 2^-24 (exact in f32). */
float kiln_rng_float(kiln_rng *r);

typedef struct {
  float temperature;         /* 0: greedy (the arg-max; the lowest id on a tie) */
  int top_k;                 /* keep the k most likely; 0: all */
  float top_p;               /* keep the most likely whose mass reaches top_p; 1: all */
  float min_p;               /* keep those with probability >= min_p * the largest; 0: all */
  float repetition_penalty;  /* a seen token's logit: / penalty if > 0, * penalty if not (CTRL); 1: off */
  float presence_penalty;    /* minus this once for a seen token (OpenAI); 0: off */
  float frequency_penalty;   /* minus this times its count (OpenAI); 0: off */
  int penalty_last_n;        /* only the last n history tokens count; 0: all given */
} kiln_sampler_params;

/* Greedy, no penalties. */
kiln_sampler_params kiln_sampler_defaults(void);

typedef struct {
  float value;               /* a logit, then a probability */
  int id;
} kiln_candidate;

typedef struct {
  int vocab;
  kiln_sampler_params p;
  kiln_rng rng;
  kiln_candidate *cand;      /* scratch: the candidates, sorted (no global state: samplers in */
                             /* different threads never share anything) */
  uint16_t *count;           /* scratch: per token, its count in the penalty window */
} kiln_sampler;

size_t kiln_sampler_scratch_size(int vocab);
/* scratch: kiln_sampler_scratch_size(vocab) bytes, aligned for int and float. The
 * generator is seeded with (seed, 54), 54 being PCG's default sequence. */
void kiln_sampler_init(kiln_sampler *s, int vocab, void *scratch, const kiln_sampler_params *p, uint64_t seed);

/* The next token id: penalties from history[0..n) (the last penalty_last_n of them), then
 * temperature, top-k, top-p, min-p, and one draw from what is left. logits (vocab of them)
 * are overwritten with the penalised, scaled values. */
int kiln_sample(kiln_sampler *s, float *logits, const int *history, int n);

#ifdef __cplusplus
}
#endif

#endif /* KILN_SAMPLE_H */
