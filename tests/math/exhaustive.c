/*
 * exhaustive.c — Kiln's math functions (templates/c/math_*.c.tmpl, included as they are
 * pasted into generated files) on every one of the 2^32 floats, against glibc's double
 * exp, tanh, erf and log (errors under 1 ulp of a double: 2^-29 of a float's ulp), for
 * the exhaustive mode of tests/t_math.sh (MATH_EXHAUSTIVE=1). The checks are those of
 * tests/py/math_sweep.py (which uses numpy's float64 functions on 2^18 inputs): the
 * largest error in ulp of the correctly rounded result against the documented bound,
 * the elementwise tolerance 8 eps (|ref| + 1) + 2^-149, non-finite results exactly.
 *
 *   cc -std=c11 -O3 -march=native -Itemplates/c tests/math/exhaustive.c -lm -o exhaustive
 *   exhaustive [exp|tanh|erf|log ...]    one PASS or FAIL line per function
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

typedef struct {
  const char *name;
  void (*kiln)(const float *restrict, float *restrict, int64_t);
  double (*ref)(double);
  double bound;   /* ulp: docs/output.md, "Math functions" */
} Fn;

static const Fn fns[] = {
    {"exp", sweep_kiln_expf, exp, 1.0},
    {"tanh", sweep_kiln_tanhf, tanh, 2.0},
    {"erf", sweep_kiln_erff, erf, 2.0},
    {"log", sweep_kiln_logf, log, 1.0},
};

/* Runs f over all floats in blocks; prints its line; returns 1 on a failure. */
static int check(const Fn *f) {
  enum { BLOCK = 1 << 20 };
  static float x[BLOCK], y[BLOCK];
  double worst = 0.0;
  float worst_x = 0.0f;
  uint64_t outside = 0, special = 0;
  for (uint64_t start = 0; start < (1ull << 32); start += BLOCK) {
    for (uint32_t i = 0; i < BLOCK; i++) {
      const uint32_t u = (uint32_t)start + i;
      memcpy(&x[i], &u, sizeof u);
    }
    f->kiln(x, y, BLOCK);
    for (uint32_t i = 0; i < BLOCK; i++) {
      const double r = f->ref((double)x[i]);
      const float r32 = (float)r;
      if (!isfinite(r32)) {   /* NaN for NaN, inf of the same sign */
        special += isnan(r32) ? !isnan(y[i]) : y[i] != r32;
        continue;
      }
      const double a = fabs((double)r32);
      const double ulp = ldexp(1.0, (a < 0x1p-126 ? -126 : ilogb(a)) - 23);
      const double err = isfinite(y[i]) ? fabs((double)y[i] - r) : INFINITY;
      outside += err > 8.0 * 0x1p-23 * (fabs(r) + 1.0) + 0x1p-149;
      if (err / ulp > worst) {
        worst = err / ulp;
        worst_x = x[i];
      }
    }
  }
  const int ok = worst <= f->bound && outside == 0 && special == 0;
  printf("%s math/exhaustive/%s: max %.3f ulp at x = %.9g over all 2^32 inputs, bound %g; %llu outside the ew tolerance, "
         "%llu non-finite mismatches\n",
         ok ? "PASS" : "FAIL", f->name, worst, (double)worst_x, f->bound, (unsigned long long)outside,
         (unsigned long long)special);
  fflush(stdout);
  return !ok;
}

int main(int argc, char **argv) {
  int bad = 0;
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    int wanted = argc < 2;
    for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], fns[k].name) == 0;
    if (wanted) bad += check(&fns[k]);
  }
  return bad != 0;
}
