/*
 * membw.c — a plain memory read bandwidth figure for bench/quant: one thread sums an
 * array of MIB mebibytes (default 256: far larger than any cache here) of 32-bit integers
 * (integer adds reassociate, so the compiler vectorises the loop and the adds are not the
 * bound), REPS times (default 10), and prints
 * "read GB/s: best median" (10^9 bytes per second; best and median of the reps). The
 * array is written once first so every page is resident. This is what a decode that
 * streams its weights once per token can hope for at most on one thread.
 *
 *   membw [MIB [REPS]]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  if (mib < 1 || reps < 1 || reps > 1000) {
    fprintf(stderr, "usage: membw [MIB [REPS]]\n");
    return 2;
  }
  size_t n = mib << 18;   /* 32-bit words */
  uint32_t *a = malloc(n * sizeof *a);
  if (!a) {
    fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  for (size_t i = 0; i < n; i++) a[i] = (uint32_t)i;
  double *gbs = malloc(sizeof(double) * (size_t)reps);
  uint64_t keep = 0;
  for (int r = 0; r < reps; r++) {
    uint32_t s = 0;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) s += a[i];
    double t = now_s() - t0;
    keep += s;
    gbs[r] = (double)(n * sizeof *a) / t / 1e9;
  }
  qsort(gbs, (size_t)reps, sizeof *gbs, cmp);
  printf("read GB/s: %.2f %.2f\n", gbs[reps - 1], gbs[reps / 2]);
  fprintf(stderr, "(checksum %llu)\n", (unsigned long long)keep);   /* keeps the sums alive */
  free(gbs);
  free(a);
  return 0;
}
