/*
 * ab_main.c — bench/ab.py's paired before/after harness: two builds of one model (ab_a, the
 * base; ab_b, the new one: ab_side.c) in one process, called in alternation on the same
 * inputs, so that both see the same machine. This machine's speed moves by a third from
 * minute to minute (docs/bench.md, "Caveats"): separate runs, even interleaved rounds of
 * separate processes, cannot resolve a few percent; a pair of calls a few milliseconds apart
 * can.
 *
 *   ab WEIGHTS_A WEIGHTS_B PAIRS THREADS INPUT_FILE...
 *
 * THREADS > 1: every call through <m>_run_par on one kiln_pool of that many threads
 * (runtime/kiln_pool.c). After one warm-up call each, PAIRS pairs: A then B, then B then A, alternately. Prints the
 * minimum and median time of each side, the median over pairs of B's time / A's, and
 * whether the outputs of the last calls are the same bytes (else the largest difference as
 * f32). Exit 0, or 1 on a bad file or allocation.
 */
#define _POSIX_C_SOURCE 200809L
#include "ab.h"
#include "kiln_pool.h"
#include "kiln_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Inputs and outputs a model may have here. */
enum { AB_MAX_IO = 64 };

/* One side, loaded: its weights, arena and outputs (the inputs are shared). */
typedef struct {
  const ab_model *m;
  kiln_weights w;
  void *arena, *outputs[AB_MAX_IO];
} side;

static int load(side *s, const ab_model *m, const char *path) {
  s->m = m;
  if (kiln_weights_load(&s->w, path, m->weights_size, m->weights_checksum) != KILN_OK) {
    fprintf(stderr, "ab: %s\n", s->w.message);
    return -1;
  }
  s->arena = kiln_arena_alloc(m->arena_size);
  if (m->arena_size && !s->arena) return -1;
  for (int i = 0; i < m->num_outputs; i++)   /* a byte at least: an empty output still gets a pointer */
    if (!(s->outputs[i] = kiln_arena_alloc(m->output_sizes[i] ? m->output_sizes[i] : 1))) return -1;
  return 0;
}

static kiln_pool *pool;   /* THREADS > 1 */

static double call(side *s, const void *const *inputs) {
  const double t0 = now();
  if (pool)
    s->m->run_par(kiln_pool_for, pool, s->w.payload, s->arena, inputs, s->outputs);
  else
    s->m->run_v(s->w.payload, s->arena, inputs, s->outputs);
  return now() - t0;
}

/* Whether the two sides' outputs are the same bytes; else prints the largest difference. */
static void compare(const side *a, const side *b) {
  double worst = 0.0;
  int same = 1;
  for (int i = 0; i < a->m->num_outputs; i++) {
    if (!memcmp(a->outputs[i], b->outputs[i], a->m->output_sizes[i])) continue;
    same = 0;
    const float *x = a->outputs[i], *y = b->outputs[i];
    for (size_t j = 0; j < a->m->output_sizes[i] / sizeof(float); j++) {
      const double d = x[j] > y[j] ? (double)x[j] - y[j] : (double)y[j] - x[j];
      if (d > worst || d != d) worst = d;
    }
  }
  if (same)
    printf("outputs: the same bytes\n");
  else
    printf("outputs: differ, largest difference %.3g (read as f32)\n", worst);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: ab WEIGHTS_A WEIGHTS_B PAIRS THREADS INPUT_FILE...\n");
    return 1;
  }
  const int pairs = atoi(argv[3]), threads = atoi(argv[4]);
  int same = ab_b.num_inputs == ab_a.num_inputs && ab_b.num_outputs == ab_a.num_outputs && ab_a.num_inputs <= AB_MAX_IO &&
             ab_a.num_outputs <= AB_MAX_IO;
  for (int i = 0; same && i < ab_a.num_inputs; i++) same = ab_a.input_sizes[i] == ab_b.input_sizes[i];
  for (int i = 0; same && i < ab_a.num_outputs; i++) same = ab_a.output_sizes[i] == ab_b.output_sizes[i];
  if (pairs < 1 || threads < 1 || ab_a.num_inputs != argc - 5 || !same) {
    fprintf(stderr, "ab: need PAIRS and THREADS >= 1, one input file per input (%d), and both builds with the same "
                    "inputs and outputs, at most %d of each\n", ab_a.num_inputs, AB_MAX_IO);
    return 1;
  }
  const void *inputs[AB_MAX_IO];
  for (int i = 0; i < ab_a.num_inputs; i++) {
    void *p = kiln_arena_alloc(ab_a.input_sizes[i] ? ab_a.input_sizes[i] : 1);
    FILE *f = fopen(argv[5 + i], "rb");
    const size_t got = p && f ? fread(p, 1, ab_a.input_sizes[i], f) : 0;
    if (f) fclose(f);
    if (got != ab_a.input_sizes[i]) {
      fprintf(stderr, "ab: %s: not %zu bytes\n", argv[5 + i], ab_a.input_sizes[i]);
      return 1;
    }
    inputs[i] = p;
  }
  side a = {0}, b = {0};
  if (load(&a, &ab_a, argv[1]) || load(&b, &ab_b, argv[2])) return 1;
  if (threads > 1 && !(pool = kiln_pool_new(threads))) return 1;
  double *ta = malloc(sizeof(double) * (size_t)pairs), *tb = malloc(sizeof(double) * (size_t)pairs),
         *ratio = malloc(sizeof(double) * (size_t)pairs);
  if (!ta || !tb || !ratio) return 1;
  call(&a, inputs), call(&b, inputs);
  for (int p = 0; p < pairs; p++) {
    if (p % 2 == 0)
      ta[p] = call(&a, inputs), tb[p] = call(&b, inputs);
    else
      tb[p] = call(&b, inputs), ta[p] = call(&a, inputs);
    ratio[p] = tb[p] / ta[p];
  }
  qsort(ta, (size_t)pairs, sizeof(double), by_value);
  qsort(tb, (size_t)pairs, sizeof(double), by_value);
  qsort(ratio, (size_t)pairs, sizeof(double), by_value);
  printf("A (base): min %.1f us, median %.1f us\n", ta[0] * 1e6, ta[pairs / 2] * 1e6);
  printf("B (new):  min %.1f us, median %.1f us\n", tb[0] * 1e6, tb[pairs / 2] * 1e6);
  printf("B / A: median over %d pairs %.3f (quartiles %.3f-%.3f), min / min %.3f\n", pairs, ratio[pairs / 2],
         ratio[pairs / 4], ratio[3 * pairs / 4], tb[0] / ta[0]);
  compare(&a, &b);
  for (int i = 0; i < ab_a.num_inputs; i++) kiln_arena_free((void *)inputs[i]);
  for (int i = 0; i < ab_a.num_outputs; i++) kiln_arena_free(a.outputs[i]), kiln_arena_free(b.outputs[i]);
  kiln_arena_free(a.arena), kiln_arena_free(b.arena);
  kiln_weights_free(&a.w), kiln_weights_free(&b.w);
  free(ta), free(tb), free(ratio);
  kiln_pool_free(pool);
  return 0;
}
