/*
 * ab.h — one side of bench/ab.py's paired before/after harness: what ab_main.c needs of a
 * generated model (a plain one, without entry points), filled in by ab_side.c.
 */
#ifndef AB_H
#define AB_H
#include <stddef.h>
#include <stdint.h>

typedef void ab_run_fn(const void *weights, void *arena, const void *const *inputs, void *const *outputs);
/* The generated header's kiln_parallel_for, spelled out (ab_main.c sees no model header). */
typedef void ab_parallel_for(void *pool, int64_t n, void (*task)(void *arg, int64_t i), void *arg);
typedef void ab_run_par_fn(ab_parallel_for *pfor, void *pool, const void *weights, void *arena,
                           const void *const *inputs, void *const *outputs);

typedef struct {
  uint64_t weights_size, weights_checksum;
  size_t arena_size;
  int num_inputs, num_outputs;
  const size_t *input_sizes, *output_sizes;
  ab_run_fn *run_v;
  ab_run_par_fn *run_par;   /* with a parallel-for (bench/ab.py --threads) */
} ab_model;

extern const ab_model ab_a, ab_b;   /* the base build and the new one */

#endif
