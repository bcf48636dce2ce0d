/*
 * timing.h — the clocks and the median of bench/llm's two C peers (plain_llama.c,
 * kiln_llm.c), shared so both measure the same way: wall time from CLOCK_MONOTONIC,
 * process CPU time from CLOCK_PROCESS_CPUTIME_ID, each in microseconds.
 */
#ifndef BENCH_LLM_TIMING_H
#define BENCH_LLM_TIMING_H

#include <stdlib.h>
#include <time.h>

static double clock_us(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

#endif
