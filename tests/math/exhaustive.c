/*
 * exhaustive.c — Kiln's math functions (templates/c/math_*.c.tmpl, included as they are
 * pasted into generated files) over a range of float bit patterns, for the exhaustive mode
 * of tests/t_math.sh (MATH_EXHAUSTIVE=1; tests/py/math_sweep.py reads the output).
 *
 *   cc -std=c11 -O3 -march=native -Itemplates/c tests/math/exhaustive.c -o exhaustive
 *   exhaustive FN START COUNT    FN exp|tanh|erf|log of the floats whose bits are START,
 *                                START + 1, ... (COUNT of them), raw <f4 on stdout
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#include "math_exp.c.tmpl"
#include "math_tanh.c.tmpl"
#include "math_erf.c.tmpl"
#include "math_log.c.tmpl"

/* Writes fn(x[i]) into y[i] for i < n: the loop the generated kernels run. */
#define KILN_SWEEP(fn) \
  static void sweep_##fn(const float *restrict x, float *restrict y, int64_t n) { \
    for (int64_t i = 0; i < n; i++) y[i] = fn(x[i]); \
  }
KILN_SWEEP(kiln_expf)
KILN_SWEEP(kiln_tanhf)
KILN_SWEEP(kiln_erff)
KILN_SWEEP(kiln_logf)

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: exhaustive exp|tanh|erf|log START COUNT\n");
    return 2;
  }
  const uint32_t start = (uint32_t)strtoul(argv[2], NULL, 0);
  const int64_t n = strtoll(argv[3], NULL, 0);
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  if (!x || !y || n <= 0) return 2;
  for (int64_t i = 0; i < n; i++) {
    const uint32_t u = start + (uint32_t)i;
    memcpy(&x[i], &u, sizeof u);
  }
  if (strcmp(argv[1], "exp") == 0) sweep_kiln_expf(x, y, n);
  else if (strcmp(argv[1], "tanh") == 0) sweep_kiln_tanhf(x, y, n);
  else if (strcmp(argv[1], "erf") == 0) sweep_kiln_erff(x, y, n);
  else if (strcmp(argv[1], "log") == 0) sweep_kiln_logf(x, y, n);
  else return 2;
  fwrite(y, sizeof *y, (size_t)n, stdout);
  free(x);
  free(y);
  return 0;
}
