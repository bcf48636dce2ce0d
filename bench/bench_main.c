/*
 * bench_main.c — times one model's generated C, for `make bench`.
 *
 * One source serves every model: scripts/bench.sh compiles it once per model
 * with the model's header and names passed as macros (BENCH_HEADER, BENCH_RUN_V,
 * BENCH_WEIGHTS_SIZE, BENCH_WEIGHTS_CHECKSUM, BENCH_ARENA_SIZE, BENCH_NUM_INPUTS,
 * BENCH_NUM_OUTPUTS), so the driver knows nothing about any model and calls the
 * pointer-array entry point <m>_run_v. Inputs are raw little-endian files in
 * declaration order; output sizes come from the command line (bench.sh reads
 * them from <m>.json) and the first output set is written back so the peers'
 * results can be compared with it.
 *
 * Timing: warm up, then time each call on its own with a monotonic clock until
 * a time budget or sample cap is reached; print the median and the minimum in
 * microseconds. Nothing here judges the numbers.
 *
 * usage: bench_c WEIGHTS BUDGET_MS IN_1 ... IN_n OUT_BYTES:OUT_FILE ...
 */
#include BENCH_HEADER
#include "kiln_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_SAMPLES 20000
#define BENCH_MIN_SAMPLES 5

/* Prints a one-line error and exits with status 1. */
static void bench_fail(const char *what, const char *arg) {
  fprintf(stderr, "bench_c: %s: %s\n", arg, what);
  exit(1);
}

/* A 64-byte aligned allocation of at least n bytes (never zero-sized). */
static void *bench_alloc(size_t n) {
  void *p = aligned_alloc(64, n ? (n + 63) / 64 * 64 : 64);
  if (!p) bench_fail("out of memory", "aligned_alloc");
  return p;
}

/* Reads a whole file into a 64-byte aligned buffer. */
static void *bench_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) bench_fail("cannot open", path);
  if (fseek(f, 0, SEEK_END) != 0) bench_fail("cannot seek", path);
  long n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) bench_fail("cannot size", path);
  void *p = bench_alloc((size_t)n);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) bench_fail("short read", path);
  fclose(f);
  return p;
}

/* Monotonic time in microseconds with nanosecond resolution (the runtime's timer
 * counts whole microseconds, too coarse for timing one call of a small model). */
static double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 3 + BENCH_NUM_INPUTS + BENCH_NUM_OUTPUTS) {
    fprintf(stderr, "usage: %s WEIGHTS BUDGET_MS IN... OUT_BYTES:OUT_FILE...\n", argv[0]);
    return 2;
  }
  kiln_weights w;
  if (kiln_weights_load(&w, argv[1], BENCH_WEIGHTS_SIZE, BENCH_WEIGHTS_CHECKSUM) != KILN_OK)
    bench_fail(w.message, "weights");
  double budget_us = atof(argv[2]) * 1000.0;

  const void *inputs[BENCH_NUM_INPUTS > 0 ? BENCH_NUM_INPUTS : 1];
  void *outputs[BENCH_NUM_OUTPUTS];
  size_t out_bytes[BENCH_NUM_OUTPUTS];
  const char *out_files[BENCH_NUM_OUTPUTS];
  for (int i = 0; i < BENCH_NUM_INPUTS; i++) inputs[i] = bench_read(argv[3 + i]);
  for (int i = 0; i < BENCH_NUM_OUTPUTS; i++) {
    const char *spec = argv[3 + BENCH_NUM_INPUTS + i], *colon = strchr(spec, ':');
    if (!colon) bench_fail("expected OUT_BYTES:OUT_FILE", spec);
    out_bytes[i] = (size_t)strtoull(spec, NULL, 10);
    out_files[i] = colon + 1;
    outputs[i] = bench_alloc(out_bytes[i]);
  }
  void *arena = bench_alloc(BENCH_ARENA_SIZE);

  /* First call: its outputs are the ones compared with the peers. */
  BENCH_RUN_V(w.payload, arena, inputs, outputs);
  for (int i = 0; i < BENCH_NUM_OUTPUTS; i++) {
    FILE *f = fopen(out_files[i], "wb");
    if (!f || fwrite(outputs[i], 1, out_bytes[i], f) != out_bytes[i] || fclose(f) != 0)
      bench_fail("cannot write", out_files[i]);
  }

  /* Warm-up: a tenth of the budget. */
  double t0 = bench_now_us();
  while (bench_now_us() - t0 < budget_us / 10) BENCH_RUN_V(w.payload, arena, inputs, outputs);

  static double samples[BENCH_MAX_SAMPLES];
  int n = 0;
  t0 = bench_now_us();
  while (n < BENCH_MAX_SAMPLES && (n < BENCH_MIN_SAMPLES || bench_now_us() - t0 < budget_us)) {
    double s = bench_now_us();
    BENCH_RUN_V(w.payload, arena, inputs, outputs);
    samples[n++] = bench_now_us() - s;
  }
  qsort(samples, (size_t)n, sizeof samples[0], bench_cmp);
  printf("%.3f %.3f %d\n", samples[n / 2], samples[0], n);

  for (int i = 0; i < BENCH_NUM_INPUTS; i++) free((void *)inputs[i]);
  for (int i = 0; i < BENCH_NUM_OUTPUTS; i++) free(outputs[i]);
  free(arena);
  kiln_weights_free(&w);
  return 0;
}
