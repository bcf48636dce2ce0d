/*
 * init.c — the deterministic parameter initialiser: the same seed and parameter
 * name give the same bytes on every machine, compiler and libm.
 *
 * Only integer arithmetic and IEEE-754 double + - * / and sqrt are used: those
 * are correctly rounded everywhere, while libm's log/sin/cos may differ in the
 * last bit between versions. The logarithm the normal distribution needs is
 * therefore written here from basic arithmetic. Floating-point contraction
 * (a*b+c fused into one FMA, which rounds differently) must stay off: gcc does
 * not contract under -std=c11, and the pragma below tells clang.
 *
 * The algorithm (docs/lua-api.md, "Deterministic initialiser", is the spec;
 * tests/t_frontend.sh checks it against an independent Python rendering):
 *   state  = FNV-1a-64(name bytes) XOR splitmix64(seed)   (one step from seed)
 *   next() = SplitMix64: state += 0x9E3779B97F4A7C15, then the usual mix
 *   u01()  = (next() >> 40) * 2^-24                         in [0, 1), 24 bits
 *   uniform(a, b): a + (b - a) * u01(), in double, rounded to float
 *   normal(mean, std): Marsaglia's polar method on u = 2*u01() - 1, v = 2*u01() - 1,
 *     rejecting s = u*u + v*v >= 1 or == 0, f = sqrt(-2 * log(s) / s); the pair
 *     gives u*f then v*f; each value is mean + std * z rounded to float
 *   zeros, ones, const(v): no random numbers drawn
 */
#include "kiln.h"

#include <math.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* One SplitMix64 step: advances *state and returns the mixed output. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A uniform double in [0, 1) with 24 random bits (exact in float and double). */
static double u01(uint64_t *state) { return (double)(splitmix64(state) >> 40) * (1.0 / 16777216.0); }

/* Natural log of a finite x > 0 from + - * / only: x = m * 2^e with m in
 * [sqrt(1/2), sqrt(2)] by exact halving/doubling, then
 * log(m) = 2 * (t + t^3/3 + t^5/5 + ...), t = (m - 1) / (m + 1), |t| <= 0.1716,
 * summed to t^41 (the tail is below 1e-32), plus e * ln 2. */
static double init_log(double x) {
  int e = 0;
  while (x < 0.70710678118654752) x *= 2.0, e--;
  while (x > 1.4142135623730951) x *= 0.5, e++;
  double t = (x - 1.0) / (x + 1.0), t2 = t * t, term = t, sum = 0.0;
  for (int k = 1; k <= 41; k += 2) {
    sum += term / (double)k;
    term *= t2;
  }
  return 2.0 * sum + (double)e * 0x1.62e42fefa39efp-1;
}

/* Fills out[0..n) by kind ("uniform" a..b, "normal" mean a std b, "zeros", "ones", "const" a); see the file comment. */
void init_fill(float *out, int64_t n, uint64_t seed, const char *param_name, const char *kind, double a, double b) {
  uint64_t s0 = seed;
  uint64_t state = kiln_fnv1a64(param_name, strlen(param_name)) ^ splitmix64(&s0);
  if (strcmp(kind, "zeros") == 0 || strcmp(kind, "ones") == 0 || strcmp(kind, "const") == 0) {
    float v = strcmp(kind, "zeros") == 0 ? 0.0f : strcmp(kind, "ones") == 0 ? 1.0f : (float)a;
    for (int64_t i = 0; i < n; i++) out[i] = v;
  } else if (strcmp(kind, "uniform") == 0) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)(a + (b - a) * u01(&state));
  } else if (strcmp(kind, "normal") == 0) {
    for (int64_t i = 0; i < n; i += 2) {
      double u, v, s;
      do {
        u = 2.0 * u01(&state) - 1.0;
        v = 2.0 * u01(&state) - 1.0;
        s = u * u + v * v;
      } while (s >= 1.0 || s == 0.0);
      double f = sqrt(-2.0 * init_log(s) / s);
      out[i] = (float)(a + b * (u * f));
      if (i + 1 < n) out[i + 1] = (float)(a + b * (v * f));
    }
  } else {
    die("init_fill: unknown kind '%s'", kind);
  }
}
